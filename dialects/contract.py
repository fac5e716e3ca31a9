"""The program contract beside the `npu` dialect: what a function's attributes and its
state ops promise an executor. The whole-program precision (`npu.precision`), the
arguments written back after every call (`npu.writes`) and which of those an op already
wrote in place, and how each linear weight is stored at a precision. The op classes stay
in `forge.dialects.npu`; every executor (the reference one, the compiled one, the plan
printer) and the cost model read the contract from here.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, StringAttr
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.utils.exceptions import VerifyException

from forge.dialects import npu
from forge.dialects.precisions import QUANTIZED_PRECISIONS, WEIGHT_PRECISIONS
from forge.dialects.shapes import element_type, is_float, shape_of

PROGRAM_PRECISION = "npu.precision"
"""Function attribute npu-assign-precision writes: the whole-program precision (one of
`dtypes.PRECISIONS`), which sets how linear weights are stored; absent means fp32."""


def program_precision(function: func.FuncOp) -> str | None:
    """The whole-program precision npu-assign-precision recorded on `function`, if any."""
    attr = function.attributes.get(PROGRAM_PRECISION)
    return attr.data if isinstance(attr, StringAttr) else None


WRITES = "npu.writes"
"""Function attribute: the arguments (by name) that the function's last results are
written back into, in place, after every call: buffers the model mutates (BatchNorm's
running statistics, counters, a KV cache). The other results are the model's outputs.

    func.func @forward(%x: ..., %count: tensor<f32>) -> (tensor<3x4xf32>, tensor<f32>)
        attributes {npu.writes = ["count"]}

means: return result 0, then copy result 1 into the tensor bound to %count."""


def written_arguments(function: func.FuncOp) -> tuple[str, ...]:
    """The argument names of `WRITES`, in the order of the results they take."""
    attr = function.attributes.get(WRITES)
    if not isinstance(attr, ArrayAttr):
        return ()
    return tuple(a.data for a in attr.data if isinstance(a, StringAttr))


def write_backs(function: func.FuncOp) -> list[tuple[int, int]]:
    """(result index, argument index) of every write-back, checked against the signature."""
    names = written_arguments(function)
    if not names:
        return []
    args = {a.name_hint: i for i, a in enumerate(function.body.block.args)}
    results = len(function.function_type.outputs.data)
    if len(names) > results:
        raise VerifyException(f"{WRITES} names {len(names)} arguments for {results} results")
    pairs = []
    for k, name in enumerate(names):
        if name not in args:
            raise VerifyException(f"{WRITES} names '{name}', which is no argument")
        pairs.append((results - len(names) + k, args[name]))
    return pairs


def in_place_writes(function: func.FuncOp) -> frozenset[int]:
    """Result indices of the write-backs an `npu.cache_update` or `npu.cached_attention`
    already did in place (the executor copies nothing for them). Raises VerifyException
    when one breaks its contract: its cache must be a written argument that nothing reads
    after it, and the function must write back into it what the op says (the update's
    result; the cache itself, for the attention)."""
    pairs = write_backs(function)
    block = function.body.block
    terminator = block.last_op
    returned = list(terminator.operands) if isinstance(terminator, func.ReturnOp) else []
    written = {arg: result for result, arg in pairs}
    done: set[int] = set()
    for op in block.ops:
        for cache, written_back in _state_writes(op):
            name = cache.name_hint if isinstance(cache, BlockArgument) else None
            if not isinstance(cache, BlockArgument) or cache.index not in written:
                raise VerifyException(
                    f"{op.name} writes %{name or '?'}, which {WRITES} does not name"
                )
            result = written[cache.index]
            if any(
                not runs_before(use.operation, op)
                for use in cache.uses
                if use.operation is not op
                and not (use.operation is terminator and use.index == result)
            ):
                raise VerifyException(
                    f"{op.name} writes %{name} in place, but %{name} has readers after it"
                )
            if result >= len(returned) or returned[result] is not written_back:
                raise VerifyException(
                    f"{op.name} of %{name} is not what the function writes back into it"
                )
            done.add(result)
    return frozenset(done)


def _state_writes(op: Operation) -> list[tuple[SSAValue, SSAValue]]:
    """(cache, what the function must write back into it) for each cache `op` writes in
    place: an update's result, or the cache itself for a cached attention."""
    if isinstance(op, npu.CacheUpdateOp):
        return [(op.cache, op.result)]
    if isinstance(op, npu.CachedAttentionOp):
        return [(op.key_cache, op.key_cache), (op.value_cache, op.value_cache)]
    return []


def runs_before(reader: Operation, update: Operation) -> bool:
    """Whether `reader` (or the op of the update's block holding it) comes before `update`."""
    block = update.parent_block()
    while reader.parent_block() is not block:
        parent = reader.parent_op()
        if parent is None:
            return False
        reader = parent
    return block is not None and block.get_operation_index(reader) < block.get_operation_index(
        update
    )


def written_in_place(value: SSAValue) -> bool:
    """Whether an `npu.cached_attention` writes `value` (one of its caches) in place."""
    return any(
        isinstance(op := use.operation, npu.CachedAttentionOp)
        and value in (op.key_cache, op.value_cache)
        for use in value.uses
    )


def copied_write_backs(function: func.FuncOp) -> list[tuple[int, int]]:
    """The write-backs a caller still has to copy after a call: `write_backs` without
    those an `npu.cache_update` did in place (one rule for every executor)."""
    in_place = in_place_writes(function)
    return [(r, a) for r, a in write_backs(function) if r not in in_place]


WeightedLinear = npu.LinearOp | npu.AddmmOp | npu.FusedLinearOp


def weight_users(value: SSAValue) -> list[WeightedLinear]:
    """The weighted linear ops that read `value` as their weight."""
    return [
        u.operation
        for u in value.uses
        if isinstance(u.operation, npu.WEIGHTED_LINEAR_OPS) and u.operation.weight is value
    ]


def is_linear_weight(value: SSAValue, users: Sequence[Operation] | None = None) -> bool:
    """Whether `value` is a weight the weight precisions apply to: a 2-D float function
    argument that some weighted linear op reads as its weight (`users`, when the caller
    has them: `weight_users(value)`)."""
    return (
        isinstance(value, BlockArgument)
        and is_float(element_type(value.type))
        and len(shape_of(value.type)) == 2
        and bool(weight_users(value) if users is None else users)
    )


def weight_storage(
    value: SSAValue, precision: str, users: Sequence[WeightedLinear] | None = None
) -> str | None:
    """The precision (`WEIGHT_PRECISIONS`) weight `value` is stored at when the program
    runs at `precision`; None when it is not a linear weight (it follows the activations).

    The one rule the executor and the cost model share: fp32, fp16 and int8 store every
    linear weight at that width (other weights follow the activations); under mixed the `precision`
    attributes npu-assign-precision wrote decide (the most precise among the weight's
    users), and an unannotated weight is int8."""
    users = weight_users(value) if users is None else users
    if not is_linear_weight(value, users):
        return None
    if precision not in QUANTIZED_PRECISIONS:
        return precision
    if precision == "int8":
        return "int8"
    requested = {op.precision.data for op in users if op.precision is not None}
    return next((p for p in WEIGHT_PRECISIONS if p in requested), "int8")
