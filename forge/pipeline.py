"""Running pass pipelines from Python, with the same registry and spec syntax as forge-opt."""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser
from xdsl.passes import PassPipeline

from forge.diagnostics import ForgeError, one_line
from forge.transforms.pattern_pass import PassRecord, collect_statistics


def make_context() -> Context:
    from xdsl.dialects.arith import Arith
    from xdsl.dialects.builtin import Builtin
    from xdsl.dialects.func import Func

    from forge.dialects.npu import NPU

    ctx = Context()
    for dialect in (Builtin, Func, Arith, NPU):
        ctx.load_dialect(dialect)
    return ctx


def parse_module(text: str, name: str = "<string>") -> ModuleOp:
    module = Parser(make_context(), text, name).parse_module()
    module.verify()
    return module


def build_pipeline(spec: str) -> PassPipeline:
    from forge.transforms import get_all_passes

    try:
        return PassPipeline.parse_spec(get_all_passes(), spec)
    except Exception as e:
        raise ForgeError(f"invalid pass pipeline '{spec}': {one_line(str(e))}") from e


def run_pipeline(module: ModuleOp, spec: str, verify: bool = True) -> list[PassRecord]:
    """Apply `spec` (e.g. "npu-dce,npu-fuse-operators{alpha=0.5}") in place; the records of
    every pass that ran, in order."""
    pipeline = build_pipeline(spec)
    with collect_statistics() as records:
        pipeline.apply(make_context(), module)
    if verify:
        module.verify()
    return records
