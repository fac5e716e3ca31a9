#!/usr/bin/env bash
# Build intel-npu-acceleration-library 1.4.0 (NNFactory) from its sdist against the
# openvino==2026.4.1 wheel and install it into the given virtual environment.
#
# The sdist's CMake downloads OpenVINO from the internet and refuses non-Ubuntu Linux;
# we point FetchContent at the unpacked PyPI wheel instead (see ../shared/DESIGN.md).
set -euo pipefail

VENV=${1:?usage: build_nnfactory.sh VENV}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY="$VENV/bin/python"
NPU_VERSION=1.4.0
PATCH_LEVEL=16  # bump when the patches below change, to force a rebuild
OV_VERSION=2026.4.1
BUILD=$ROOT/build/nnfactory
SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
PKG=$SITE/intel_npu_acceleration_library

if [ -f "$PKG/lib/libintel_npu_acceleration_library.so" ] && [ -f "$PKG/.forge-built-$NPU_VERSION-p$PATCH_LEVEL" ]; then
  echo "[nnfactory] already installed in $PKG"
  exit 0
fi

echo "[nnfactory] building intel-npu-acceleration-library $NPU_VERSION against openvino $OV_VERSION"
mkdir -p "$BUILD/dl"
pip_dl() { "$PY" -m pip download -q --disable-pip-version-check --no-deps -d "$BUILD/dl" "$@" 2>&1 | grep -v "^WARNING: Location" || true; }
[ -f "$BUILD/dl/intel_npu_acceleration_library-$NPU_VERSION.tar.gz" ] \
  || pip_dl --no-binary :all: "intel-npu-acceleration-library==$NPU_VERSION"
ls "$BUILD"/dl/openvino-"$OV_VERSION"-*.whl >/dev/null 2>&1 \
  || pip_dl --only-binary :all: "openvino==$OV_VERSION"

SDIST=$BUILD/intel_npu_acceleration_library-$NPU_VERSION
OVWHEEL=$BUILD/openvino-wheel
OVROOT=$BUILD/openvino-root
rm -rf "$SDIST" "$OVWHEEL" "$OVROOT" "$BUILD/cmake" "$BUILD/lib"
tar -xzf "$BUILD/dl/intel_npu_acceleration_library-$NPU_VERSION.tar.gz" -C "$BUILD"
"$PY" -m zipfile -e "$(ls "$BUILD"/dl/openvino-"$OV_VERSION"-*.whl | head -n1)" "$OVWHEEL"

# Three patches to upstream's inference.h. It sets OpenVINO's model cache to "./cache",
# writing blobs into whatever the working directory is: make it opt-in
# (NNFACTORY_CACHE_DIR=<dir>). And see the performance-mode note below.
INFERENCE_H=$SDIST/include/intel_npu_acceleration_library/inference.h
"$PY" - "$INFERENCE_H" <<'PYEOF'
import sys
path = sys.argv[1]
src = open(path).read()
old = 'core.set_property(ov::cache_dir("cache"));'
new = ('if (const char* cache_dir = std::getenv("NNFACTORY_CACHE_DIR")) '
       '{ core.set_property(ov::cache_dir(cache_dir)); }')
assert old in src, "inference.h changed upstream; update the cache-dir patch"
src = src.replace(old, new)
# Upstream asks OpenVINO for THROUGHPUT (several streams, few threads per request);
# Forge runs one request at a time, so default to LATENCY. NNFACTORY_PERFORMANCE_MODE=
# THROUGHPUT restores upstream's choice.
old = "ov::hint::performance_mode(ov::hint::PerformanceMode::THROUGHPUT)"
new = ("ov::hint::performance_mode(std::getenv(\"NNFACTORY_PERFORMANCE_MODE\") && "
       "std::string(std::getenv(\"NNFACTORY_PERFORMANCE_MODE\")) == \"THROUGHPUT\" ? "
       "ov::hint::PerformanceMode::THROUGHPUT : ov::hint::PerformanceMode::LATENCY)")
assert old in src, "inference.h changed upstream; update the performance-mode patch"
src = "#include <cstdlib>\n#include <string>\n" + src.replace(old, new)
# OpenVINO's CPU plugin quantizes activations on the fly (groups of 32) for matmuls with
# int8 weights: faster, but no longer the weight-only int8 Forge promises. Off unless
# NNFACTORY_DYNAMIC_QUANTIZATION_GROUP_SIZE asks for it (Forge's int8 "dynamic" mode).
# NNFACTORY_SNIPPETS_MODE (DISABLE, the default, or ENABLE) goes to the CPU plugin with
# every compile_model (it is not a core-level property in 2024.4): 2024.4's snippets MHA
# kernel is wrong when heads == sequence length (see conversion/nnfactory_graph.py);
# Forge keeps them off on 2026.4 too.
# NNFACTORY_INFERENCE_PRECISION (f32, the default, or bf16/f16) too: on a CPU with
# avx512_bf16 or AMX the plugin's own default is bf16, which moved tiny Llamas' logits
# by 1e-1 where Forge promises fp32 to 1e-5 (seen on an AMD EPYC Zen 4).
old = "        // Compile model\n        compiled_model = core.compile_model(model, device);"
new = ("        ov::AnyMap config;\n"
       "        if (device == \"CPU\") {\n"
       "            const char* group = std::getenv(\"NNFACTORY_DYNAMIC_QUANTIZATION_GROUP_SIZE\");\n"
       "            core.set_property(device, ov::hint::dynamic_quantization_group_size("
       "group ? std::strtoull(group, nullptr, 10) : 0));\n"
       "            const char* snippets = std::getenv(\"NNFACTORY_SNIPPETS_MODE\");\n"
       "            config[\"SNIPPETS_MODE\"] = std::string(snippets ? snippets : \"DISABLE\");\n"
       "            const char* precision = std::getenv(\"NNFACTORY_INFERENCE_PRECISION\");\n"
       "            config[\"INFERENCE_PRECISION_HINT\"] = std::string(precision ? precision : \"f32\");\n"
       "        }\n"
       "        compiled_model = core.compile_model(model, device, config);")
assert old in src, "inference.h changed upstream; update the dynamic-quantization patch"
src = src.replace(old, new)
# Upstream runs one inference inside compile_model ("First inference"): on GPT-2 that is
# a whole forward pass (about 0.2 s) counted as compile time, where OpenVINO's own
# compile_model runs none. The CPU plugin prepares static-shape kernels and packs weights
# at compile, so the first call pays no more than that pass. NNFACTORY_FIRST_INFERENCE=1
# restores upstream's warm-up.
old = "        // First inference\n        infer_request.infer();"
new = ("        const char* first = std::getenv(\"NNFACTORY_FIRST_INFERENCE\");\n"
       "        if (first && std::string(first) == \"1\") { infer_request.infer(); }")
assert old in src, "inference.h changed upstream; update the first-inference patch"
src = src.replace(old, new)
open(path, "w").write(src)
PYEOF

# A third patch adds `constant_shared`: a Constant over the caller's memory
# (ov::op::v0::Constant(const ov::Tensor&) shares it). Upstream's `constant` copies,
# so baking GPT-2's 500 MB of weights into a graph cost one copy before OpenVINO's own
# packing. Forge keeps the arrays alive as long as the compiled graph. And `op_dtype`
# returns the element type's position in OpenVINO's Type_t enum, which the Python side
# reads as 2024's numbering (f32 = 5); 2026 inserted types before it, so the patch maps
# each type to that numbering by name.
"$PY" - "$SDIST/include/intel_npu_acceleration_library/nn_factory.h" "$SDIST/src/bindings.cpp" <<'PYEOF'
import sys
header, bindings = sys.argv[1], sys.argv[2]
src = open(header).read()
anchor = "    ov::op::Op* constant(ov::element::Type_t dtype, std::vector<size_t> shape, const void* dst) {"
assert anchor in src, "nn_factory.h changed upstream; update the constant_shared patch"
method = (
    "    ov::op::Op* constant_shared(ov::element::Type_t dtype, std::vector<size_t> shape, void* dst) {\n"
    "        auto constant = std::make_shared<ov::opset1::Constant>(ov::Tensor(dtype, ov::Shape(shape), dst));\n"
    "        operations.push_back(constant);\n"
    "        return constant.get();\n"
    "    }\n\n"
)
src = src.replace(anchor, method + anchor)
# `mark_llm` gives the model a one-element state read and written through a
# ScaledDotProductAttention: the CPU plugin's test for a large language model (an SDPA
# and a variable; plugin.cpp, getModelType). Only for such a model does its
# FullyConnected keep f16 weights f16 and widen them in the kernel, which halves the
# bytes a decode step reads (dnnl_fullyconnected_primitive.cpp,
# useWeightsDecompressionImpl); any other model gets them widened to f32 at compile.
old = '        model = std::make_shared<ov::Model>(results, parameters, "NNFactory");'
assert old in src, "nn_factory.h changed upstream; update the mark_llm patch"
src = src.replace(old, '        model = std::make_shared<ov::Model>(results, sinks, parameters, "NNFactory");')
anchor = "    void result(ov::op::Op* op) {"
assert anchor in src, "nn_factory.h changed upstream; update the mark_llm patch"
method = (
    "    ov::SinkVector sinks;\n\n"
    "    void mark_llm() {\n"
    "        ov::op::util::VariableInfo info{ov::PartialShape{1, 1, 1, 1}, ov::element::f32, \"forge_llm_marker\"};\n"
    "        auto variable = std::make_shared<ov::op::util::Variable>(info);\n"
    "        auto init = ov::opset13::Constant::create(ov::element::f32, ov::Shape{1, 1, 1, 1}, {0.0f});\n"
    "        auto state = std::make_shared<ov::opset13::ReadValue>(init, variable);\n"
    "        auto sdpa = std::make_shared<ov::opset13::ScaledDotProductAttention>(state, state, state, false);\n"
    "        sinks.push_back(std::make_shared<ov::opset13::Assign>(sdpa, variable));\n"
    "    }\n\n"
)
open(header, "w").write(src.replace(anchor, method + anchor))
src = open(bindings).read()
anchor = "intel_npu_acceleration_library_DLL_API ov::op::Op* matmul("
assert anchor in src, "bindings.cpp changed upstream; update the constant_shared patch"
function = (
    "intel_npu_acceleration_library_DLL_API ov::op::Op* constant_shared("
    "intel_npu_acceleration_library::ModelFactory* factory, size_t size, unsigned int* data, "
    "char* dtype, void* dst) {\n"
    "    ov::element::Type_t ov_dtype = intel_npu_acceleration_library::dtype_from_string(std::string(dtype));\n"
    "    std::vector<size_t> shape(data, data + size);\n"
    "    return factory->constant_shared(ov_dtype, shape, dst);\n"
    "}\n\n"
)
src = src.replace(anchor, function + anchor, 1)
# `mark_decompression` marks a Convert of narrow constant weights as a decompression
# (what OpenVINO's IR reader does for a model saved with f16 weights): the CPU plugin
# then keeps the weights narrow and its FullyConnected kernels read them directly,
# where an unmarked Convert is folded into a wide copy at compile. The wheel's headers
# do not ship transformations/rt_info/decompression.hpp; libopenvino exports the
# function, so it is declared here (with C++ linkage: bindings.cpp is one extern "C" block).
function = (
    "intel_npu_acceleration_library_DLL_API void mark_llm(intel_npu_acceleration_library::ModelFactory* factory) {\n"
    "    factory->mark_llm();\n"
    "}\n\n"
    "extern \"C++\" { namespace ov { void mark_as_decompression(const std::shared_ptr<ov::Node>& node); } }\n\n"
    "intel_npu_acceleration_library_DLL_API void mark_decompression(ov::op::Op* op) {\n"
    "    ov::mark_as_decompression(op->shared_from_this());\n"
    "}\n\n"
)
src = src.replace(anchor, function + anchor, 1)
old_dtype = """    auto dtype = static_cast<ov::element::Type_t>(in0->get_output_element_type(0));
    return static_cast<size_t>(dtype);"""
assert old_dtype in src, "bindings.cpp changed upstream; update the op_dtype patch"
new_dtype = """    switch (static_cast<ov::element::Type_t>(in0->get_output_element_type(0))) {
        case ov::element::Type_t::boolean: return 2;
        case ov::element::Type_t::bf16: return 3;
        case ov::element::Type_t::f16: return 4;
        case ov::element::Type_t::f32: return 5;
        case ov::element::Type_t::f64: return 6;
        case ov::element::Type_t::i4: return 7;
        case ov::element::Type_t::i8: return 8;
        case ov::element::Type_t::i16: return 9;
        case ov::element::Type_t::i32: return 10;
        case ov::element::Type_t::i64: return 11;
        default: return 0;
    }"""
src = src.replace(old_dtype, new_dtype)
open(bindings, "w").write(src)
PYEOF

# `paged_attention_windowed` adds OpenVINO's PagedAttentionExtension (attention over a
# cache that the node itself writes the new keys and values into, in place: GenAI's form,
# one node a layer), with its sliding window (0: none; W: each token sees itself and the
# W - 1 positions before it, as transformers' sliding_window; the name changed with the
# window argument, so a build from before has no such symbol and Forge runs the op on the
# CPU instead of calling it with an argument it ignores). Forge keeps its [1, heads, capacity, head_dim] caches and presents them as
# one sequence per key/value head with blocks of 32 positions in order: [heads x blocks,
# 1, 32, head_dim] is the same memory (conversion/cached_attention.py). The op's header is
# OpenVINO's dev API, not in the wheel; the class is declared here as 2026.4.1 defines
# it (libopenvino exports its constructor; make_shared in its clone_with_new_inputs
# allocates 480 bytes, which the static_assert checks). A graph with one is compiled
# with KV_CACHE_PRECISION f32, the precision of Forge's caches.
"$PY" - "$SDIST/include/intel_npu_acceleration_library/nn_factory.h" "$SDIST/src/bindings.cpp" "$INFERENCE_H" <<'PYEOF'
import sys
header, bindings, inference = sys.argv[1:4]
src = open(header).read()
anchor = "namespace intel_npu_acceleration_library {"
assert src.count(anchor) == 1, "nn_factory.h changed upstream; update the paged_attention patch"
declaration = """namespace ov { namespace op {
class OPENVINO_API PagedAttentionExtension : public ov::op::Op {
public:
    OPENVINO_OP("PagedAttentionExtension")
    PagedAttentionExtension(const ov::OutputVector& args, bool write_kv_cache = true);
    void validate_and_infer_types() override;
    std::shared_ptr<ov::Node> clone_with_new_inputs(const ov::OutputVector& new_args) const override;
    bool visit_attributes(ov::AttributeVisitor& visitor) override;
protected:
    std::vector<ov::element::Type> m_output_type;
    bool m_write_kv_cache = true;
};
static_assert(sizeof(PagedAttentionExtension) == 480, "PagedAttentionExtension is not 2026.4.1's");
} }

"""
src = src.replace(anchor, declaration + anchor)
anchor = "    void result(ov::op::Op* op) {"
assert anchor in src, "nn_factory.h changed upstream; update the paged_attention patch"
method = """    ov::op::Op* paged_attention(ov::op::Op* query, ov::op::Op* key, ov::op::Op* value,
                                ov::op::Op* key_cache, ov::op::Op* value_cache, ov::op::Op* positions,
                                size_t sequences, size_t tokens, size_t blocks, size_t head_size, float scale,
                                int32_t window) {
        auto i32 = [](ov::Shape shape, std::vector<int32_t> values) {
            return ov::opset13::Constant::create(ov::element::i32, shape, values)->output(0);
        };
        auto empty = [](ov::element::Type type, ov::Shape shape) {
            return ov::opset13::Constant::create(type, shape, std::vector<float>{})->output(0);
        };
        ov::Shape cache_shape{sequences * blocks, 1, 32, head_size};
        for (ov::op::Op* cache : {key_cache, value_cache}) {
            auto* parameter = dynamic_cast<ov::opset13::Parameter*>(cache);
            if (parameter == nullptr) {
                throw std::runtime_error("paged_attention: a cache must be a graph parameter");
            }
            parameter->set_partial_shape(cache_shape);
            parameter->validate_and_infer_types();
        }
        auto first = std::make_shared<ov::opset13::Gather>(positions->output(0), i32({1}, {0}), i32({}, {0}));
        auto start = std::make_shared<ov::opset13::Convert>(first, ov::element::i32);
        auto past_lens = std::make_shared<ov::opset13::Broadcast>(start, i32({1}, {int32_t(sequences)}));
        auto last = std::make_shared<ov::opset13::Add>(start, i32({1}, {int32_t(tokens)}));
        auto max_context = std::make_shared<ov::opset13::Squeeze>(last, i32({1}, {0}));
        std::vector<int32_t> begins, block_begins, table;
        for (size_t s = 0; s <= sequences; ++s) {
            begins.push_back(int32_t(s * tokens));
            block_begins.push_back(int32_t(s * blocks));
        }
        for (size_t b = 0; b < sequences * blocks; ++b) table.push_back(int32_t(b));
        ov::OutputVector args{
            query->output(0), key->output(0), value->output(0), key_cache->output(0), value_cache->output(0),
            past_lens, i32({sequences + 1}, begins), i32({sequences * blocks}, table), i32({sequences + 1}, block_begins),
            ov::opset13::Constant::create(ov::element::f32, ov::Shape{}, {scale})->output(0), i32({}, {window}),
            empty(ov::element::f32, {0}), max_context,
            empty(ov::element::i32, {0}), empty(ov::element::i32, {0}), empty(ov::element::i32, {0}),
            empty(ov::element::f32, {0}), empty(ov::element::f32, {0}), i32({}, {0}), i32({}, {0}),
            empty(ov::element::f32, {0, 0, 0, 0}), i32({}, {0}),
            empty(ov::element::i32, {0}), empty(ov::element::i32, {0}), empty(ov::element::i32, {0}),
            empty(ov::element::i32, {0}), empty(ov::element::u8, {0}), empty(ov::element::i32, {0})};
        auto attention = std::make_shared<ov::op::PagedAttentionExtension>(args, true);
        auto& info = attention->get_rt_info();
        info["num_k_heads"] = size_t(1);
        info["num_v_heads"] = size_t(1);
        info["k_head_size"] = head_size;
        info["v_head_size"] = head_size;
        operations.push_back(attention);
        return attention.get();
    }

"""
src = src.replace(anchor, method + anchor)
open(header, "w").write(src)
src = open(bindings).read()
anchor = "intel_npu_acceleration_library_DLL_API ov::op::Op* matmul("
assert anchor in src, "bindings.cpp changed upstream; update the paged_attention patch"
function = """intel_npu_acceleration_library_DLL_API ov::op::Op* paged_attention_windowed(
    intel_npu_acceleration_library::ModelFactory* factory, ov::op::Op* query, ov::op::Op* key, ov::op::Op* value,
    ov::op::Op* key_cache, ov::op::Op* value_cache, ov::op::Op* positions, size_t sequences, size_t tokens,
    size_t blocks, size_t head_size, float scale, int32_t window) {
    return factory->paged_attention(query, key, value, key_cache, value_cache, positions, sequences, tokens, blocks,
                                    head_size, scale, window);
}

"""
open(bindings, "w").write(src.replace(anchor, function + anchor, 1))
src = open(inference).read()
old = "        compiled_model = core.compile_model(model, device, config);"
assert old in src, "inference.h changed upstream; update the paged_attention patch"
new = ("        for (const auto& node : model->get_ops()) {\n"
       "            if (std::string(node->get_type_name()) == \"PagedAttentionExtension\") {\n"
       "                config[\"KV_CACHE_PRECISION\"] = std::string(\"f32\");\n"
       "            }\n"
       "        }\n" + old)
src = src.replace(old, new)
# The plugin turns a paged cache's input dynamic ([?, 1, 32, head_dim]), so an input
# tensor set over the caller's memory takes the model's own (static) shape.
old = "        X = ov::Tensor(tensor.get_element_type(), tensor.get_shape(), _X);\n        infer_request.set_input_tensor(idx, X);"
assert old in src, "inference.h changed upstream; update the paged_attention patch"
new = ("        const auto& declared = model->input(idx).get_partial_shape();\n"
       "        X = ov::Tensor(tensor.get_element_type(), declared.is_static() ? declared.to_shape() : tensor.get_shape(), _X);\n"
       "        infer_request.set_input_tensor(idx, X);")
open(inference, "w").write(src.replace(old, new))
PYEOF

# `eltwise_max` and `eltwise_min` add OpenVINO's Maximum and Minimum with torch's NaN
# semantics: a NaN operand gives NaN. The CPU plugin's Maximum alone does not (measured
# on 2026.4.1: max(NaN, 1) = 1, max(1, NaN) = NaN), so where either operand is NaN the
# node selects x + y, which is NaN there. Composing the ops from Relu and subtraction
# instead cancels catastrophically (max(-1e9, y) lost every digit of y).
"$PY" - "$SDIST/include/intel_npu_acceleration_library/nn_factory.h" "$SDIST/src/bindings.cpp" <<'PYEOF'
import sys
header, bindings = sys.argv[1], sys.argv[2]
src = open(header).read()
anchor = "    ov::op::Op* eltwise_div(ov::op::Op* x1, ov::op::Op*& x2) {"
assert src.count(anchor) == 1, "nn_factory.h changed upstream; update the eltwise_max patch"
method = """    template <class Extreme>
    ov::op::Op* nan_propagating(ov::op::Op* x1, ov::op::Op* x2) {
        auto x = x1->output(0), y = x2->output(0);
        auto either_nan = std::make_shared<ov::opset13::LogicalOr>(std::make_shared<ov::opset13::IsNaN>(x),
                                                                   std::make_shared<ov::opset13::IsNaN>(y));
        auto nan = std::make_shared<ov::opset13::Add>(x, y);
        auto extreme = std::make_shared<Extreme>(x, y);
        auto out = std::make_shared<ov::opset13::Select>(either_nan, nan, extreme);
        operations.push_back(either_nan);
        operations.push_back(nan);
        operations.push_back(extreme);
        operations.push_back(out);
        return out.get();
    }

    ov::op::Op* eltwise_max(ov::op::Op* x1, ov::op::Op* x2) {
        return nan_propagating<ov::opset13::Maximum>(x1, x2);
    }

    ov::op::Op* eltwise_min(ov::op::Op* x1, ov::op::Op* x2) {
        return nan_propagating<ov::opset13::Minimum>(x1, x2);
    }

"""
open(header, "w").write(src.replace(anchor, method + anchor))
src = open(bindings).read()
anchor = "intel_npu_acceleration_library_DLL_API ov::op::Op* eltwise_div("
assert src.count(anchor) == 1, "bindings.cpp changed upstream; update the eltwise_max patch"
function = """intel_npu_acceleration_library_DLL_API ov::op::Op* eltwise_max(intel_npu_acceleration_library::ModelFactory* factory,
                                                               ov::op::Op* in0, ov::op::Op* in1) {
    return factory->eltwise_max(in0, in1);
}

intel_npu_acceleration_library_DLL_API ov::op::Op* eltwise_min(intel_npu_acceleration_library::ModelFactory* factory,
                                                               ov::op::Op* in0, ov::op::Op* in1) {
    return factory->eltwise_min(in0, in1);
}

"""
open(bindings, "w").write(src.replace(anchor, function + anchor, 1))
PYEOF

# FetchContent expects an OpenVINO release archive layout.
mkdir -p "$OVROOT/runtime/lib"
ln -s "$OVWHEEL/openvino/cmake" "$OVROOT/runtime/cmake"
ln -s "$OVWHEEL/openvino/libs" "$OVROOT/runtime/lib/intel64"
ln -s "$OVWHEEL/openvino" "$OVROOT/openvino"

CMAKE=$(command -v cmake || true)
if [ -z "$CMAKE" ]; then
  "$PY" -m pip install -q --disable-pip-version-check cmake 2>&1 | grep -v "^WARNING: Location" || true
  CMAKE=$VENV/bin/cmake
fi

"$CMAKE" -S "$SDIST" -B "$BUILD/cmake" -DCMAKE_BUILD_TYPE=Release \
  -DOV_LIBRARY_URL=file:///unused -DFETCHCONTENT_SOURCE_DIR_OPENVINO="$OVROOT" \
  -DCMAKE_LIBRARY_OUTPUT_DIRECTORY="$BUILD/lib" >"$BUILD/cmake.log" 2>&1 \
  || { tail -n 20 "$BUILD/cmake.log" >&2; echo "[nnfactory] error: cmake configure failed" >&2; exit 1; }
"$CMAKE" --build "$BUILD/cmake" -j 2 >>"$BUILD/cmake.log" 2>&1 \
  || { tail -n 20 "$BUILD/cmake.log" >&2; echo "[nnfactory] error: build failed" >&2; exit 1; }

rm -rf "$PKG"
cp -r "$SDIST/intel_npu_acceleration_library" "$PKG"
mkdir -p "$PKG/lib"
cp -a "$BUILD"/lib/*.so* "$PKG/lib/"
ln -sf "$(basename "$(ls "$PKG"/lib/libopenvino.so.* | head -n1)")" "$PKG/lib/libopenvino.so"
touch "$PKG/.forge-built-$NPU_VERSION-p$PATCH_LEVEL"
echo "[nnfactory] installed into $PKG"
