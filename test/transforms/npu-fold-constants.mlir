// RUN: forge-opt %s -p npu-fold-constants --split-input-file | filecheck %s
// RUN: forge-opt %s -p 'npu-fold-constants{max_elements=4}' --split-input-file | filecheck %s --check-prefix=SMALL

// Neutral scalars: x + 0, x - 0, x * 1, x / 1, pow(x, 1); `+ 0` after an integer arange.
// CHECK-LABEL: func.func @scalar_identities
// CHECK-NEXT:    func.return %x, %i : tensor<2x3xf32>, tensor<4xi64>
func.func @scalar_identities(%x: tensor<2x3xf32>, %i: tensor<4xi64>) -> (tensor<2x3xf32>, tensor<4xi64>) {
  %0 = npu.add %x {scalar = 0.000000e+00 : f64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = npu.sub %0 {scalar = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = npu.mul %1 {scalar = 1.000000e+00 : f64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %3 = npu.div %2 {scalar = 1 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %4 = npu.pow %3 {scalar = 1.000000e+00 : f64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %5 = npu.add %i {scalar = 0 : i64} : (tensor<4xi64>) -> tensor<4xi64>
  func.return %4, %5 : tensor<2x3xf32>, tensor<4xi64>
}

// -----

// Neutral splat constants on either side; the consumed constants go too.
// CHECK-LABEL: func.func @splat_identities
// CHECK-NEXT:    func.return %x : tensor<2x3xf32>
func.func @splat_identities(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %one = npu.constant dense<1.000000e+00> : tensor<3xf32>
  %zero = npu.constant dense<0.000000e+00> : tensor<f32>
  %0 = npu.mul %x, %one : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = npu.add %zero, %0 : (tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %1 : tensor<2x3xf32>
}

// -----

// Not identities: x * 2; x + 0 that promotes i64 to f32; x * ones that broadcasts x
// to a larger shape; x * a constant that is not a splat.
// CHECK-LABEL: func.func @not_identities
// CHECK:         %[[ONES:.*]] = npu.constant dense<1.000000e+00> : tensor<2x3xf32>
// CHECK:         %[[MIXED:.*]] = npu.constant dense<[1.000000e+00, 2.000000e+00, 1.000000e+00]> : tensor<3xf32>
// CHECK-NEXT:    %[[A:.*]] = npu.mul %x {scalar = 2.000000e+00 : f64}
// CHECK-NEXT:    %[[B:.*]] = npu.add %i {scalar = 0.000000e+00 : f64} : (tensor<4xi64>) -> tensor<4xf32>
// CHECK-NEXT:    %[[C:.*]] = npu.mul %r, %[[ONES]] : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[D:.*]] = npu.mul %r, %[[MIXED]]
// CHECK-NEXT:    func.return %[[A]], %[[B]], %[[C]], %[[D]]
func.func @not_identities(%x: tensor<2x3xf32>, %i: tensor<4xi64>, %r: tensor<3xf32>) -> (tensor<2x3xf32>, tensor<4xf32>, tensor<2x3xf32>, tensor<3xf32>) {
  %ones = npu.constant dense<1.000000e+00> : tensor<2x3xf32>
  %mixed = npu.constant dense<[1.000000e+00, 2.000000e+00, 1.000000e+00]> : tensor<3xf32>
  %0 = npu.mul %x {scalar = 2.000000e+00 : f64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = npu.add %i {scalar = 0.000000e+00 : f64} : (tensor<4xi64>) -> tensor<4xf32>
  %2 = npu.mul %r, %ones : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %3 = npu.mul %r, %mixed : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  func.return %0, %1, %2, %3 : tensor<2x3xf32>, tensor<4xf32>, tensor<2x3xf32>, tensor<3xf32>
}

// -----

// Data movement to the type the input already has: view, reshape, expand, squeeze of a
// non-unit dim, a full slice (`x[:, -8:]`), a cast to the same dtype, a transpose of two
// size-1 dims, a permute that only moves size-1 dims, `aten.alias`, a same-dim transpose.
// CHECK-LABEL: func.func @identity_moves
// CHECK-NEXT:    func.return %x : tensor<1x8x1x4xf32>
func.func @identity_moves(%x: tensor<1x8x1x4xf32>) -> tensor<1x8x1x4xf32> {
  %0 = npu.view %x : tensor<1x8x1x4xf32> -> tensor<1x8x1x4xf32>
  %1 = npu.reshape %0 : tensor<1x8x1x4xf32> -> tensor<1x8x1x4xf32>
  %2 = npu.expand %1 : tensor<1x8x1x4xf32> -> tensor<1x8x1x4xf32>
  %3 = npu.squeeze %2 {dim = 1 : i64} : tensor<1x8x1x4xf32> -> tensor<1x8x1x4xf32>
  %4 = npu.slice %3 {dim = 1 : i64, start = -8 : i64, end = 9223372036854775807 : i64, step = 1 : i64} : tensor<1x8x1x4xf32> -> tensor<1x8x1x4xf32>
  %5 = npu.cast %4 : tensor<1x8x1x4xf32> -> tensor<1x8x1x4xf32>
  %6 = npu.transpose %5 {dim0 = 0 : i64, dim1 = -2 : i64} : tensor<1x8x1x4xf32> -> tensor<1x8x1x4xf32>
  %7 = npu.permute %6 {dims = array<i64: 2, 1, 0, 3>} : tensor<1x8x1x4xf32> -> tensor<1x8x1x4xf32>
  %8 = npu.generic "aten.alias.default"(%7) : (tensor<1x8x1x4xf32>) -> tensor<1x8x1x4xf32>
  %9 = npu.transpose %8 {dim0 = 1 : i64, dim1 = -3 : i64} : tensor<1x8x1x4xf32> -> tensor<1x8x1x4xf32>
  func.return %9 : tensor<1x8x1x4xf32>
}

// -----

// Same types, but data moves (a square transpose, a permute of two size-4 dims), the
// shape changes (view, squeeze of a unit dim), or the dtype changes: all kept.
// CHECK-LABEL: func.func @moves_that_stay
// CHECK-NEXT:    npu.transpose %x {dim0 = 0 : i64, dim1 = 1 : i64} : tensor<4x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT:    npu.permute %x {dims = array<i64: 1, 0>} : tensor<4x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT:    npu.view %x : tensor<4x4xf32> -> tensor<16xf32>
// CHECK-NEXT:    npu.squeeze %y {dim = 0 : i64} : tensor<1x4xf32> -> tensor<4xf32>
// CHECK-NEXT:    npu.cast %x : tensor<4x4xf32> -> tensor<4x4xf16>
// CHECK-NEXT:    func.return
func.func @moves_that_stay(%x: tensor<4x4xf32>, %y: tensor<1x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<16xf32>, tensor<4xf32>, tensor<4x4xf16>) {
  %0 = npu.transpose %x {dim0 = 0 : i64, dim1 = 1 : i64} : tensor<4x4xf32> -> tensor<4x4xf32>
  %1 = npu.permute %x {dims = array<i64: 1, 0>} : tensor<4x4xf32> -> tensor<4x4xf32>
  %2 = npu.view %x : tensor<4x4xf32> -> tensor<16xf32>
  %3 = npu.squeeze %y {dim = 0 : i64} : tensor<1x4xf32> -> tensor<4xf32>
  %4 = npu.cast %x : tensor<4x4xf32> -> tensor<4x4xf16>
  func.return %0, %1, %2, %3, %4 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<16xf32>, tensor<4xf32>, tensor<4x4xf16>
}

// -----

// Reshape chains: two views become one view; a reshape anywhere keeps a reshape; a chain
// back to the source type is the source.
// CHECK-LABEL: func.func @reshape_chains
// CHECK-NEXT:    %[[V:.*]] = npu.view %x : tensor<2x3x4xf32> -> tensor<24xf32>
// CHECK-NEXT:    %[[R:.*]] = npu.reshape %x : tensor<2x3x4xf32> -> tensor<4x6xf32>
// CHECK-NEXT:    func.return %[[V]], %[[R]], %x
func.func @reshape_chains(%x: tensor<2x3x4xf32>) -> (tensor<24xf32>, tensor<4x6xf32>, tensor<2x3x4xf32>) {
  %0 = npu.view %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %1 = npu.view %0 : tensor<6x4xf32> -> tensor<24xf32>
  %2 = npu.reshape %0 : tensor<6x4xf32> -> tensor<24xf32>
  %3 = npu.view %2 : tensor<24xf32> -> tensor<4x6xf32>
  %4 = npu.view %3 : tensor<4x6xf32> -> tensor<2x3x4xf32>
  func.return %1, %3, %4 : tensor<24xf32>, tensor<4x6xf32>, tensor<2x3x4xf32>
}

// -----

// squeeze(unsqueeze(x, d), d) and unsqueeze(squeeze(x, d), d) (LFM2's conv weight);
// a squeeze of another dim stays.
// CHECK-LABEL: func.func @unsqueeze_squeeze
// CHECK-NEXT:    %[[U:.*]] = npu.unsqueeze %x {dim = 0 : i64}
// CHECK-NEXT:    %[[S:.*]] = npu.squeeze %[[U]] {dim = 1 : i64}
// CHECK-NEXT:    func.return %x, %w, %[[S]]
func.func @unsqueeze_squeeze(%x: tensor<1x8xf32>, %w: tensor<64x1x3xf32>) -> (tensor<1x8xf32>, tensor<64x1x3xf32>, tensor<1x8xf32>) {
  %0 = npu.unsqueeze %x {dim = -2 : i64} : tensor<1x8xf32> -> tensor<1x1x8xf32>
  %1 = npu.squeeze %0 {dim = 1 : i64} : tensor<1x1x8xf32> -> tensor<1x8xf32>
  %2 = npu.squeeze %w {dim = 1 : i64} : tensor<64x1x3xf32> -> tensor<64x3xf32>
  %3 = npu.unsqueeze %2 {dim = 1 : i64} : tensor<64x3xf32> -> tensor<64x1x3xf32>
  %4 = npu.unsqueeze %x {dim = 0 : i64} : tensor<1x8xf32> -> tensor<1x1x8xf32>
  %5 = npu.squeeze %4 {dim = 1 : i64} : tensor<1x1x8xf32> -> tensor<1x8xf32>
  func.return %1, %3, %5 : tensor<1x8xf32>, tensor<64x1x3xf32>, tensor<1x8xf32>
}

// -----

// GPT-2's position ids and causal mask: arange, + 0, unsqueeze, le, new_ones, and; the
// zeros scalar. All constant: evaluated, splats printed as `dense<v>`. The part that reads
// %mask is computed at run time. With max_elements=4 only the tiny results fold.
// CHECK-LABEL: func.func @causal_mask
// CHECK-NOT:     npu.generic
// CHECK-DAG:     %[[POS:.*]] = npu.constant dense<{{\[\[}}0, 1, 2, 3]]> : tensor<1x4xi64>
// CHECK-DAG:     %[[TRIL:.*]] = npu.constant dense<{{\[\[\[\[}}true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]]]> : tensor<1x1x4x4xi1>
// CHECK:         %[[AND:.*]] = npu.and %[[TRIL]], %mask
// CHECK-NEXT:    %[[ZERO:.*]] = npu.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:    %[[WHERE:.*]] = npu.where %[[AND]], %[[ZERO]]
// CHECK-NEXT:    func.return %[[POS]], %[[WHERE]]
// SMALL-LABEL: func.func @causal_mask
// SMALL-NOT:     npu.generic
// SMALL-DAG:     %[[COL:.*]] = npu.constant dense<{{\[\[\[\[}}0], [1], [2], [3]]]]> : tensor<1x1x4x1xi64>
// SMALL-DAG:     %[[ROW:.*]] = npu.constant dense<{{\[\[\[\[}}0, 1, 2, 3]]]]> : tensor<1x1x1x4xi64>
// SMALL-DAG:     %[[TRUE:.*]] = npu.constant dense<true> : tensor<i1>
// SMALL:         %[[LE:.*]] = npu.le %[[ROW]], %[[COL]]
// SMALL-NEXT:    npu.and %[[TRUE]], %[[LE]]
func.func @causal_mask(%mask: tensor<1x1x1x4xi1>) -> (tensor<1x4xi64>, tensor<1x1x4x4xf32>) {
  %0 = npu.generic "aten.arange.default"(4 : i64) kwargs {device = "cpu", pin_memory = false} : () -> tensor<4xi64>
  %1 = npu.add %0 {scalar = 0 : i64} : (tensor<4xi64>) -> tensor<4xi64>
  %2 = npu.unsqueeze %1 {dim = 0 : i64} : tensor<4xi64> -> tensor<1x4xi64>
  %3 = npu.unsqueeze %2 {dim = 1 : i64} : tensor<1x4xi64> -> tensor<1x1x4xi64>
  %4 = npu.unsqueeze %3 {dim = 3 : i64} : tensor<1x1x4xi64> -> tensor<1x1x4x1xi64>
  %5 = npu.unsqueeze %3 {dim = 2 : i64} : tensor<1x1x4xi64> -> tensor<1x1x1x4xi64>
  %6 = npu.generic "aten.new_ones.default"(%4, []) kwargs {dtype = i1, pin_memory = false} : (tensor<1x1x4x1xi64>) -> tensor<i1>
  %7 = npu.le %5, %4 : (tensor<1x1x1x4xi64>, tensor<1x1x4x1xi64>) -> tensor<1x1x4x4xi1>
  %8 = npu.and %6, %7 : (tensor<i1>, tensor<1x1x4x4xi1>) -> tensor<1x1x4x4xi1>
  %9 = npu.and %8, %mask : (tensor<1x1x4x4xi1>, tensor<1x1x1x4xi1>) -> tensor<1x1x4x4xi1>
  %10 = npu.generic "aten.zeros.default"([]) kwargs {dtype = f32, device = "cpu", pin_memory = false} : () -> tensor<f32>
  %11 = npu.where %9, %10 {scalar = -3.4028234663852886e+38 : f64} : (tensor<1x1x4x4xi1>, tensor<f32>) -> tensor<1x1x4x4xf32>
  func.return %2, %11 : tensor<1x4xi64>, tensor<1x1x4x4xf32>
}

// -----

// `new_ones` reads only its input's type: it folds even when the input is not constant.
// CHECK-LABEL: func.func @value_independent
// SMALL-LABEL: func.func @value_independent
// CHECK-NEXT:    %[[ONES:.*]] = npu.constant dense<1.000000e+00> : tensor<2x2xf32>
// CHECK-NEXT:    func.return %[[ONES]]
func.func @value_independent(%x: tensor<3xf32>) -> tensor<2x2xf32> {
  %0 = npu.generic "aten.new_ones.default"(%x, [2 : i64, 2 : i64]) : (tensor<3xf32>) -> tensor<2x2xf32>
  func.return %0 : tensor<2x2xf32>
}

// -----

// Not evaluated: results over max_elements (4096), an op marked side_effects, a random
// op, a result that is not finite (inf does not round-trip through xDSL's text), and an
// op with a non-constant operand.
// CHECK-LABEL: func.func @not_evaluated
// CHECK-NEXT:    npu.generic "aten.arange.default"(8192 : i64) : () -> tensor<8192xi64>
// CHECK-NEXT:    npu.generic "aten.arange.default"(4 : i64) side_effects : () -> tensor<4xi64>
// CHECK-NEXT:    npu.generic "aten.rand.default"([4 : i64]) : () -> tensor<4xf32>
// CHECK-NEXT:    npu.constant dense<1.000000e+00> : tensor<2xf32>
// CHECK-NEXT:    npu.div
// CHECK-NEXT:    npu.exp %x
// CHECK-NEXT:    func.return
func.func @not_evaluated(%x: tensor<2xf32>) -> (tensor<8192xi64>, tensor<4xi64>, tensor<4xf32>, tensor<2xf32>, tensor<2xf32>) {
  %0 = npu.generic "aten.arange.default"(8192 : i64) : () -> tensor<8192xi64>
  %1 = npu.generic "aten.arange.default"(4 : i64) side_effects : () -> tensor<4xi64>
  %2 = npu.generic "aten.rand.default"([4 : i64]) : () -> tensor<4xf32>
  %3 = npu.constant dense<1.000000e+00> : tensor<2xf32>
  %4 = npu.div %3 {scalar = 0.000000e+00 : f64} : (tensor<2xf32>) -> tensor<2xf32>
  %5 = npu.exp %x : tensor<2xf32>
  func.return %0, %1, %2, %4, %5 : tensor<8192xi64>, tensor<4xi64>, tensor<4xf32>, tensor<2xf32>, tensor<2xf32>
}

// -----

// A split of a constant: one constant per result.
// CHECK-LABEL: func.func @split_constant
// CHECK-NEXT:    %[[A:.*]] = npu.constant dense<[0, 1]> : tensor<2xi64>
// CHECK-NEXT:    %[[B:.*]] = npu.constant dense<[2, 3, 4]> : tensor<3xi64>
// CHECK-NEXT:    func.return %[[A]], %[[B]]
func.func @split_constant() -> (tensor<2xi64>, tensor<3xi64>) {
  %0 = npu.generic "aten.arange.default"(5 : i64) : () -> tensor<5xi64>
  %1, %2 = npu.split %0 {dim = 0 : i64, split_sizes = array<i64: 2, 3>} : tensor<5xi64> -> tensor<2xi64>, tensor<3xi64>
  func.return %1, %2 : tensor<2xi64>, tensor<3xi64>
}

// -----

// A `?` proves nothing: expand may grow a run-time 1, a slice may drop elements.
// CHECK-LABEL: func.func @dynamic_stays
// CHECK-NEXT:    npu.expand %x : tensor<?x4xf32> -> tensor<?x4xf32>
// CHECK-NEXT:    npu.slice %x {dim = 0 : i64, start = 1 : i64
// CHECK-NEXT:    func.return
func.func @dynamic_stays(%x: tensor<?x4xf32>) -> (tensor<?x4xf32>, tensor<?x4xf32>) {
  %0 = npu.expand %x : tensor<?x4xf32> -> tensor<?x4xf32>
  %1 = npu.slice %x {dim = 0 : i64, start = 1 : i64, end = 9223372036854775807 : i64, step = 1 : i64} : tensor<?x4xf32> -> tensor<?x4xf32>
  func.return %0, %1 : tensor<?x4xf32>, tensor<?x4xf32>
}

// -----

// Partial rotary with the whole head rotated: `cat(rotated, x[..., 16:])` concatenates
// an empty slice; the cat becomes its one non-empty operand and the slice disappears.
// CHECK-LABEL: func.func @empty_concat_operand
// CHECK-NEXT:    %0 = npu.neg %x
// CHECK-NEXT:    func.return %0 : tensor<1x4x16x16xf32>
func.func @empty_concat_operand(%x: tensor<1x4x16x16xf32>) -> tensor<1x4x16x16xf32> {
  %0 = npu.neg %x : tensor<1x4x16x16xf32>
  %1 = npu.slice %x {dim = 3 : i64, start = 16 : i64, end = 9223372036854775807 : i64, step = 1 : i64} : tensor<1x4x16x16xf32> -> tensor<1x4x16x0xf32>
  %2 = npu.cat %0, %1 {dim = -1 : i64} : (tensor<1x4x16x16xf32>, tensor<1x4x16x0xf32>) -> tensor<1x4x16x16xf32>
  func.return %2 : tensor<1x4x16x16xf32>
}

// -----

// Of three operands, the empty one goes; the other two stay concatenated.
// CHECK-LABEL: func.func @empty_middle_operand
// CHECK-NEXT:    %0 = npu.cat %x, %y {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
// CHECK-NEXT:    func.return %0
func.func @empty_middle_operand(%x: tensor<2x3xf32>, %e: tensor<2x0xf32>, %y: tensor<2x5xf32>) -> tensor<2x8xf32> {
  %0 = npu.cat %x, %e, %y {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2x0xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
  func.return %0 : tensor<2x8xf32>
}

// -----

// Negative: no operand is empty along the cat dimension (a zero elsewhere is not
// enough to drop it), and a dynamic extent proves nothing.
// CHECK-LABEL: func.func @no_empty_operand
// CHECK-NEXT:    %0 = npu.cat %x, %y {dim = 1 : i64}
// CHECK-NEXT:    %1 = npu.cat %d, %y {dim = 1 : i64}
// CHECK-NEXT:    %2 = npu.cat %z, %z {dim = 1 : i64}
func.func @no_empty_operand(%x: tensor<2x3xf32>, %y: tensor<2x5xf32>, %d: tensor<2x?xf32>, %z: tensor<0x2xf32>) -> (tensor<2x8xf32>, tensor<2x?xf32>, tensor<0x4xf32>) {
  %0 = npu.cat %x, %y {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
  %1 = npu.cat %d, %y {dim = 1 : i64} : (tensor<2x?xf32>, tensor<2x5xf32>) -> tensor<2x?xf32>
  %2 = npu.cat %z, %z {dim = 1 : i64} : (tensor<0x2xf32>, tensor<0x2xf32>) -> tensor<0x4xf32>
  func.return %0, %1, %2 : tensor<2x8xf32>, tensor<2x?xf32>, tensor<0x4xf32>
}

// -----

// A clone into the contiguous format of a value the graph computes is `npu.contiguous`
// (HF attention's `.transpose(1, 2).contiguous()` in the static-cache programs); one that
// keeps the format is its input.
// CHECK-LABEL: func.func @clones_of_computed_values
// CHECK-NEXT:    %[[R:.*]] = npu.neg %x : tensor<1x2x3x4xf32>
// CHECK-NEXT:    %[[T:.*]] = npu.transpose %[[R]] {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<1x2x3x4xf32> -> tensor<1x3x2x4xf32>
// CHECK-NEXT:    %[[C:.*]] = npu.contiguous %[[T]] : tensor<1x3x2x4xf32>
// CHECK-NEXT:    func.return %[[C]], %[[T]] : tensor<1x3x2x4xf32>, tensor<1x3x2x4xf32>
func.func @clones_of_computed_values(%x: tensor<1x2x3x4xf32>) -> (tensor<1x3x2x4xf32>, tensor<1x3x2x4xf32>) {
  %r = npu.neg %x : tensor<1x2x3x4xf32>
  %0 = npu.transpose %r {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<1x2x3x4xf32> -> tensor<1x3x2x4xf32>
  %1 = npu.generic "aten.clone.default"(%0) kwargs {memory_format = "contiguous_format"} : (tensor<1x3x2x4xf32>) -> tensor<1x3x2x4xf32>
  %2 = npu.generic "aten.clone.default"(%0) : (tensor<1x3x2x4xf32>) -> tensor<1x3x2x4xf32>
  func.return %1, %2 : tensor<1x3x2x4xf32>, tensor<1x3x2x4xf32>
}

// -----

// State stays a copy: a contiguous clone of an argument or of a view of one, and of a
// cache `npu.cache_update` writes in place, may be read after the state changes.
// CHECK-LABEL: func.func @clones_of_arguments
// CHECK:         npu.generic "aten.clone.default"(%x) kwargs {memory_format = "contiguous_format"}
// CHECK:         npu.generic "aten.clone.default"(%{{.*}}) kwargs {memory_format = "contiguous_format"}
// CHECK-NOT:     npu.contiguous
func.func @clones_of_arguments(%x: tensor<1x2x8x4xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x8x2x4xf32>) {
  %0 = npu.generic "aten.clone.default"(%x) kwargs {memory_format = "contiguous_format"} : (tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32>
  %1 = npu.transpose %x {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<1x2x8x4xf32> -> tensor<1x8x2x4xf32>
  %2 = npu.generic "aten.clone.default"(%1) kwargs {memory_format = "contiguous_format"} : (tensor<1x8x2x4xf32>) -> tensor<1x8x2x4xf32>
  func.return %0, %2 : tensor<1x2x8x4xf32>, tensor<1x8x2x4xf32>
}

// -----

// CHECK-LABEL: func.func @clone_of_an_updated_cache
// CHECK:         npu.generic "aten.clone.default"(%new) kwargs {memory_format = "contiguous_format"}
// CHECK-NOT:     npu.contiguous
func.func @clone_of_an_updated_cache(%pos: tensor<1xi64>, %rows: tensor<1x2x1x4xf32>, %cache: tensor<1x2x8x4xf32>) -> (tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) attributes {npu.writes = ["cache"]} {
  %new = npu.cache_update %cache[%pos] = %rows {dim = 2 : i64} : tensor<1x2x8x4xf32>, tensor<1xi64>, tensor<1x2x1x4xf32>
  %0 = npu.generic "aten.clone.default"(%new) kwargs {memory_format = "contiguous_format"} : (tensor<1x2x8x4xf32>) -> tensor<1x2x8x4xf32>
  func.return %0, %new : tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>
}

// -----

// A functional copy (`self.copy_(src)` exported as aten.copy) into a tensor of src's own
// type is src: HF's static cache does one per layer, and CSE then merges their arithmetic.
// CHECK-LABEL: func.func @functional_copy
// CHECK-NEXT:    %[[A:.*]] = npu.add %pos {scalar = 1 : i64}
// CHECK-NEXT:    %[[B:.*]] = npu.add %pos {scalar = 1 : i64}
// CHECK-NEXT:    func.return %[[A]], %[[B]]
func.func @functional_copy(%pos: tensor<i64>, %len0: tensor<i64>, %len1: tensor<i64>) -> (tensor<i64>, tensor<i64>) {
  %0 = npu.generic "aten.copy.default"(%len0, %pos) : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %1 = npu.generic "aten.copy.default"(%len1, %pos) : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %2 = npu.add %0 {scalar = 1 : i64} : (tensor<i64>) -> tensor<i64>
  %3 = npu.add %1 {scalar = 1 : i64} : (tensor<i64>) -> tensor<i64>
  func.return %2, %3 : tensor<i64>, tensor<i64>
}

// -----

// Negative: a copy that broadcasts src into a bigger self, or converts its dtype, stays.
// CHECK-LABEL: func.func @converting_copy
// CHECK:         npu.generic "aten.copy.default"(%big, %x)
// CHECK:         npu.generic "aten.copy.default"(%wide, %x)
func.func @converting_copy(%x: tensor<4xf32>, %big: tensor<2x4xf32>, %wide: tensor<4xf64>) -> (tensor<2x4xf32>, tensor<4xf64>) {
  %0 = npu.generic "aten.copy.default"(%big, %x) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %1 = npu.generic "aten.copy.default"(%wide, %x) : (tensor<4xf64>, tensor<4xf32>) -> tensor<4xf64>
  func.return %0, %1 : tensor<2x4xf32>, tensor<4xf64>
}
