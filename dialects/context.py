"""The dialects Forge's IR uses, registered once, and how a module is entered.

Every parser of `npu` text (forge-opt, `forge.transforms.run_pipeline`, the tests)
gets its context from `make_context()`, so the set of dialects is written once.
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.arith import Arith
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.dialects.func import Func
from xdsl.ir import Operation, Region, SSAValue
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException

from forge.dialects.contract import in_place_writes
from forge.dialects.npu import NPU
from forge.support import xdsl_compat
from forge.support.diagnostics import ForgeError, op_error

xdsl_compat.apply()

DIALECTS = (Builtin, Func, Arith, NPU)


def make_context() -> Context:
    ctx = Context()
    for dialect in DIALECTS:
        ctx.load_dialect(dialect)
    return ctx


def parse_module(text: str, name: str = "<string>") -> ModuleOp:
    module = Parser(make_context(), text, name).parse_module()
    module.verify()
    verify_functions(module)
    return module


def verify_functions(root: Operation) -> None:
    """Function-level contracts xDSL's verifier does not know: SSA dominance, and that
    `npu.writes` names arguments for results that exist, and every `npu.cache_update`
    keeps its in-place contract."""
    verify_dominance(root)
    for function in root.walk():
        if not isinstance(function, func.FuncOp) or not function.body.blocks:
            continue
        try:
            in_place_writes(function)  # checks write_backs too
        except VerifyException as e:
            raise op_error(function, str(e)) from e


def verify_dominance(root: Operation) -> None:
    """MLIR's SSA rule, which xDSL's verifier does not check: every operand is an
    argument of an enclosing block or a result of an op that comes before its user in
    an enclosing block. (A region of several blocks counts as one scope: Forge's IR has
    none, and branch dominance is beyond what it needs.)"""
    for region in root.regions:
        _verify_region(region, frozenset())


def _verify_region(region: Region, outer: frozenset[SSAValue]) -> None:
    visible = set(outer)
    if len(region.blocks) > 1:
        for block in region.blocks:
            visible.update(block.args)
            visible.update(r for op in block.ops for r in op.results)
    for block in region.blocks:
        visible.update(block.args)
        for op in block.ops:
            for index, operand in enumerate(op.operands):
                if operand not in visible:
                    raise op_error(op, f"operand #{index} does not dominate this use")
            for nested in op.regions:
                _verify_region(nested, frozenset(visible))
            visible.update(op.results)


def entry_function(module: ModuleOp | func.FuncOp) -> func.FuncOp:
    """The one function of an imported program (Forge compiles one entry point)."""
    if isinstance(module, func.FuncOp):
        return module
    functions = [op for op in module.ops if isinstance(op, func.FuncOp)]
    if len(functions) != 1:
        raise ForgeError(f"expected one func.func in the module, found {len(functions)}")
    return functions[0]


def infer_num_inputs(function: func.FuncOp) -> int:
    """Leading arguments whose name has no dot: the importer names weights by state-dict
    key, which has one for every parameter of a submodule. Pass `num_inputs` instead
    when the model has parameters at its root."""
    count = 0
    for arg in function.body.block.args:
        if arg.name_hint is not None and "." in arg.name_hint:
            break
        count += 1
    return count
