// npu-bubble-up-row-gather: a gather of rows near a program's end (the position a
// prefill returns logits of) moves above the row-wise ops that make those rows, so they
// compute only the gathered rows.

// RUN: forge-opt %s -p npu-bubble-up-row-gather --split-input-file | filecheck %s
// RUN: forge-opt %s -p npu-bubble-up-row-gather --split-input-file --check-numerics

// Positive: a Llama-like last layer. The gather moves above the final norm, the MLP, the
// post-attention norm, the residual add and the output projection; the attention's
// output (a transpose of the rows) and the layer's input (its key and value projections
// read every row) are gathered where they are made, and nothing computes 4 rows after.
// CHECK-LABEL: func.func @last_layer
// CHECK-NEXT:    %0 = npu.reshape %h : tensor<1x4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %1 = npu.embedding %0, %at : (tensor<4x8xf32>, tensor<1xi64>) -> tensor<1x8xf32>
// CHECK-NEXT:    %2 = npu.view %1 : tensor<1x8xf32> -> tensor<1x1x8xf32>
// CHECK-NEXT:    %kv = npu.linear %h, %wk : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
// CHECK:         %t = npu.transpose %a
// CHECK-NEXT:    %3 = npu.reshape %t : tensor<1x4x2x4xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %4 = npu.embedding %3, %at : (tensor<4x8xf32>, tensor<1xi64>) -> tensor<1x8xf32>
// CHECK-NEXT:    %5 = npu.reshape %4 : tensor<1x8xf32> -> tensor<1x1x8xf32>
// CHECK-NEXT:    %6 = npu.linear %5, %wo : (tensor<1x1x8xf32>, tensor<8x8xf32>) -> tensor<1x1x8xf32>
// CHECK-NEXT:    %7 = npu.add %2, %6 : (tensor<1x1x8xf32>, tensor<1x1x8xf32>) -> tensor<1x1x8xf32>
// CHECK-NEXT:    %8 = npu.pow %7 {scalar = 2 : i64} : (tensor<1x1x8xf32>) -> tensor<1x1x8xf32>
// CHECK-NEXT:    %9 = npu.mean %8 {dims = array<i64: -1>, keepdim} : tensor<1x1x8xf32> -> tensor<1x1x1xf32>
// CHECK-NEXT:    %10 = npu.add %9 {scalar = 1.000000e-05 : f64} : (tensor<1x1x1xf32>) -> tensor<1x1x1xf32>
// CHECK-NEXT:    %11 = npu.rsqrt %10 : tensor<1x1x1xf32>
// CHECK-NEXT:    %12 = npu.mul %7, %11 : (tensor<1x1x8xf32>, tensor<1x1x1xf32>) -> tensor<1x1x8xf32>
// CHECK-NEXT:    %13 = npu.mul %wn, %12 : (tensor<8xf32>, tensor<1x1x8xf32>) -> tensor<1x1x8xf32>
// CHECK-NEXT:    %14 = npu.fused_linear %13, %wg {activation = "silu"} : (tensor<1x1x8xf32>, tensor<16x8xf32>) -> tensor<1x1x16xf32>
// CHECK-NEXT:    %15 = npu.linear %13, %wu : (tensor<1x1x8xf32>, tensor<16x8xf32>) -> tensor<1x1x16xf32>
// CHECK-NEXT:    %16 = npu.mul %14, %15 : (tensor<1x1x16xf32>, tensor<1x1x16xf32>) -> tensor<1x1x16xf32>
// CHECK-NEXT:    %17 = npu.linear %16, %wd : (tensor<1x1x16xf32>, tensor<8x16xf32>) -> tensor<1x1x8xf32>
// CHECK-NEXT:    %18 = npu.add %7, %17 : (tensor<1x1x8xf32>, tensor<1x1x8xf32>) -> tensor<1x1x8xf32>
// CHECK-NEXT:    %row3 = npu.rms_norm %18 weight %wf : tensor<8xf32> {normalized_shape = array<i64: 8>, eps = 1.000000e-05 : f64} : tensor<1x1x8xf32> -> tensor<1x1x8xf32>
// CHECK-NEXT:    %logits = npu.linear %row3, %wh : (tensor<1x1x8xf32>, tensor<32x8xf32>) -> tensor<1x1x32xf32>
// CHECK-NEXT:    func.return %logits, %kv
func.func @last_layer(%h: tensor<1x4x8xf32>, %a: tensor<1x2x4x4xf32>, %at: tensor<1xi64>, %wk: tensor<8x8xf32>, %wo: tensor<8x8xf32>, %wn: tensor<8xf32>, %wg: tensor<16x8xf32>, %wu: tensor<16x8xf32>, %wd: tensor<8x16xf32>, %wf: tensor<8xf32>, %wh: tensor<32x8xf32>) -> (tensor<1x1x32xf32>, tensor<1x4x8xf32>) {
  %kv = npu.linear %h, %wk : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %t = npu.transpose %a {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<1x2x4x4xf32> -> tensor<1x4x2x4xf32>
  %r = npu.reshape %t : tensor<1x4x2x4xf32> -> tensor<1x4x8xf32>
  %o = npu.linear %r, %wo : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %res = npu.add %h, %o : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %sq = npu.pow %res {scalar = 2 : i64} : (tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %ms = npu.mean %sq {dims = array<i64: -1>, keepdim} : tensor<1x4x8xf32> -> tensor<1x4x1xf32>
  %eps = npu.add %ms {scalar = 1.000000e-05 : f64} : (tensor<1x4x1xf32>) -> tensor<1x4x1xf32>
  %inv = npu.rsqrt %eps : tensor<1x4x1xf32>
  %nx = npu.mul %res, %inv : (tensor<1x4x8xf32>, tensor<1x4x1xf32>) -> tensor<1x4x8xf32>
  %n = npu.mul %wn, %nx : (tensor<8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %g = npu.fused_linear %n, %wg {activation = "silu"} : (tensor<1x4x8xf32>, tensor<16x8xf32>) -> tensor<1x4x16xf32>
  %u = npu.linear %n, %wu : (tensor<1x4x8xf32>, tensor<16x8xf32>) -> tensor<1x4x16xf32>
  %gu = npu.mul %g, %u : (tensor<1x4x16xf32>, tensor<1x4x16xf32>) -> tensor<1x4x16xf32>
  %d = npu.linear %gu, %wd : (tensor<1x4x16xf32>, tensor<8x16xf32>) -> tensor<1x4x8xf32>
  %out = npu.add %res, %d : (tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
  %f = npu.rms_norm %out weight %wf : tensor<8xf32> {normalized_shape = array<i64: 8>, eps = 1.000000e-05 : f64} : tensor<1x4x8xf32> -> tensor<1x4x8xf32>
  %flat = npu.view %f : tensor<1x4x8xf32> -> tensor<4x8xf32>
  %row = npu.embedding %flat, %at : (tensor<4x8xf32>, tensor<1xi64>) -> tensor<1x8xf32>
  %row3 = npu.view %row : tensor<1x8xf32> -> tensor<1x1x8xf32>
  %logits = npu.linear %row3, %wh : (tensor<1x1x8xf32>, tensor<32x8xf32>) -> tensor<1x1x32xf32>
  func.return %logits, %kv : tensor<1x1x32xf32>, tensor<1x4x8xf32>
}

// -----

// Positive: GPT-2's form, linears in 2-D (addmm over [rows, features]) between views, a
// layer norm and a bias broadcast along the rows (kept whole), two rows gathered. A
// transpose of the dims after the rows is row-wise too.
// CHECK-LABEL: func.func @gpt2_mlp
// CHECK-NEXT:    %0 = npu.reshape %x : tensor<1x4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %1 = npu.embedding %0, %at : (tensor<4x8xf32>, tensor<2xi64>) -> tensor<2x8xf32>
// CHECK-NEXT:    %2 = npu.view %1 : tensor<2x8xf32> -> tensor<1x2x8xf32>
// CHECK-NEXT:    %3 = npu.layer_norm %2 weight %lw : tensor<8xf32> bias %lb : tensor<8xf32> {normalized_shape = array<i64: 8>, eps = 1.000000e-05 : f64} : tensor<1x2x8xf32> -> tensor<1x2x8xf32>
// CHECK-NEXT:    %4 = npu.view %3 : tensor<1x2x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT:    %5 = npu.addmm %b, %4, %w : (tensor<16xf32>, tensor<2x8xf32>, tensor<8x16xf32>) -> tensor<2x16xf32>
// CHECK-NEXT:    %6 = npu.view %5 : tensor<2x16xf32> -> tensor<1x2x4x4xf32>
// CHECK-NEXT:    %7 = npu.transpose %6 {dim0 = 2 : i64, dim1 = 3 : i64} : tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>
// CHECK-NEXT:    %8 = npu.gelu %7 {approximate = "tanh"} : tensor<1x2x4x4xf32>
// CHECK-NEXT:    %rows = npu.view %8 : tensor<1x2x4x4xf32> -> tensor<2x16xf32>
// CHECK-NEXT:    func.return %rows
func.func @gpt2_mlp(%x: tensor<1x4x8xf32>, %at: tensor<2xi64>, %lw: tensor<8xf32>, %lb: tensor<8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<2x16xf32> {
  %n = npu.layer_norm %x weight %lw : tensor<8xf32> bias %lb : tensor<8xf32> {normalized_shape = array<i64: 8>, eps = 1.000000e-05 : f64} : tensor<1x4x8xf32> -> tensor<1x4x8xf32>
  %n2 = npu.view %n : tensor<1x4x8xf32> -> tensor<4x8xf32>
  %fc = npu.addmm %b, %n2, %w : (tensor<16xf32>, tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %fc4 = npu.view %fc : tensor<4x16xf32> -> tensor<1x4x4x4xf32>
  %tr = npu.transpose %fc4 {dim0 = 2 : i64, dim1 = 3 : i64} : tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %act = npu.gelu %tr {approximate = "tanh"} : tensor<1x4x4x4xf32>
  %flat = npu.reshape %act : tensor<1x4x4x4xf32> -> tensor<4x16xf32>
  %rows = npu.embedding %flat, %at : (tensor<4x16xf32>, tensor<2xi64>) -> tensor<2x16xf32>
  func.return %rows : tensor<2x16xf32>
}

// -----

// Negative: a decode step's one row gathered from one row: nothing to save.
// CHECK-LABEL: func.func @one_row
// CHECK-NEXT:    %o = npu.linear %x, %w
// CHECK-NEXT:    %flat = npu.view %o
// CHECK-NEXT:    %row = npu.embedding %flat, %at
func.func @one_row(%x: tensor<1x1x8xf32>, %w: tensor<8x8xf32>, %at: tensor<1xi64>) -> tensor<1x8xf32> {
  %o = npu.linear %x, %w : (tensor<1x1x8xf32>, tensor<8x8xf32>) -> tensor<1x1x8xf32>
  %flat = npu.view %o : tensor<1x1x8xf32> -> tensor<1x8xf32>
  %row = npu.embedding %flat, %at : (tensor<1x8xf32>, tensor<1xi64>) -> tensor<1x8xf32>
  func.return %row : tensor<1x8xf32>
}

// -----

// Negative: the program also returns every row of the linear's result: its rows are all
// computed anyway, and the gather stays where it is.
// CHECK-LABEL: func.func @read_in_full
// CHECK-NEXT:    %o = npu.linear %x, %w
// CHECK-NEXT:    %flat = npu.view %o
// CHECK-NEXT:    %row = npu.embedding %flat, %at
func.func @read_in_full(%x: tensor<1x4x8xf32>, %w: tensor<8x8xf32>, %at: tensor<1xi64>) -> (tensor<1x8xf32>, tensor<1x4x8xf32>) {
  %o = npu.linear %x, %w : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %flat = npu.view %o : tensor<1x4x8xf32> -> tensor<4x8xf32>
  %row = npu.embedding %flat, %at : (tensor<4x8xf32>, tensor<1xi64>) -> tensor<1x8xf32>
  func.return %row, %o : tensor<1x8xf32>, tensor<1x4x8xf32>
}

// -----

// Negative: ops that mix rows: a softmax along them, a mean over them, a transpose that
// moves them. Each gather stays.
// CHECK-LABEL: func.func @mixes_rows
// CHECK-NEXT:    %s = npu.softmax %x
// CHECK-NEXT:    %sf = npu.view %s
// CHECK-NEXT:    %r1 = npu.embedding %sf, %at
// CHECK-NEXT:    %m = npu.mean %y
// CHECK-NEXT:    %mf = npu.view %m
// CHECK-NEXT:    %r2 = npu.embedding %mf, %at
// CHECK-NEXT:    %t = npu.transpose %x
// CHECK-NEXT:    %tf = npu.reshape %t
// CHECK-NEXT:    %r3 = npu.embedding %tf, %at
// CHECK-NEXT:    func.return %r1, %r2, %r3
func.func @mixes_rows(%x: tensor<1x4x8xf32>, %y: tensor<1x4x4x8xf32>, %at: tensor<1xi64>) -> (tensor<1x8xf32>, tensor<1x8xf32>, tensor<1x4xf32>) {
  %s = npu.softmax %x {dim = 1 : i64} : tensor<1x4x8xf32>
  %sf = npu.view %s : tensor<1x4x8xf32> -> tensor<4x8xf32>
  %r1 = npu.embedding %sf, %at : (tensor<4x8xf32>, tensor<1xi64>) -> tensor<1x8xf32>
  %m = npu.mean %y {dims = array<i64: 1>} : tensor<1x4x4x8xf32> -> tensor<1x4x8xf32>
  %mf = npu.view %m : tensor<1x4x8xf32> -> tensor<4x8xf32>
  %r2 = npu.embedding %mf, %at : (tensor<4x8xf32>, tensor<1xi64>) -> tensor<1x8xf32>
  %t = npu.transpose %x {dim0 = 1 : i64, dim1 = 2 : i64} : tensor<1x4x8xf32> -> tensor<1x8x4xf32>
  %tf = npu.reshape %t : tensor<1x8x4xf32> -> tensor<8x4xf32>
  %r3 = npu.embedding %tf, %at : (tensor<8x4xf32>, tensor<1xi64>) -> tensor<1x4xf32>
  func.return %r1, %r2, %r3 : tensor<1x8xf32>, tensor<1x8xf32>, tensor<1x4xf32>
}

// -----

// Negative: indices computed after the producer (they cannot be gathered with before
// it), and an integer value (no gather of integers is moved).
// CHECK-LABEL: func.func @late_indices_and_integers
// CHECK-NEXT:    %o = npu.linear %x, %w
// CHECK-NEXT:    %at = npu.add %i
// CHECK-NEXT:    %flat = npu.view %o
// CHECK-NEXT:    %row = npu.embedding %flat, %at
// CHECK-NEXT:    %n = npu.add %ids
// CHECK-NEXT:    %nf = npu.view %n
// CHECK-NEXT:    %nr = npu.embedding %nf, %i
func.func @late_indices_and_integers(%x: tensor<1x4x8xf32>, %w: tensor<8x8xf32>, %i: tensor<1xi64>, %ids: tensor<1x4x2xi64>) -> (tensor<1x8xf32>, tensor<1x2xi64>) {
  %o = npu.linear %x, %w : (tensor<1x4x8xf32>, tensor<8x8xf32>) -> tensor<1x4x8xf32>
  %at = npu.add %i {scalar = 1 : i64} : (tensor<1xi64>) -> tensor<1xi64>
  %flat = npu.view %o : tensor<1x4x8xf32> -> tensor<4x8xf32>
  %row = npu.embedding %flat, %at : (tensor<4x8xf32>, tensor<1xi64>) -> tensor<1x8xf32>
  %n = npu.add %ids {scalar = 1 : i64} : (tensor<1x4x2xi64>) -> tensor<1x4x2xi64>
  %nf = npu.view %n : tensor<1x4x2xi64> -> tensor<4x2xi64>
  %nr = npu.embedding %nf, %i : (tensor<4x2xi64>, tensor<1xi64>) -> tensor<1x2xi64>
  func.return %row, %nr : tensor<1x8xf32>, tensor<1x2xi64>
}
