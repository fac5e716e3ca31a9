"""Run `npu` IR op by op on the CPU: the numerics oracle and the CPU half of the executor.

Everything is resolved when the executor is built: each op becomes a
(kernel, input slots, output slots) step over a flat list of values, so a run is
one loop of Python calls with no lookups by name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue

from forge.dialects import contract
from forge.dialects.context import entry_function
from forge.support.diagnostics import ForgeError, op_error
from forge.target.cpu_kernels import Kernel, cpu_kernel

Step = tuple[Kernel, tuple[int, ...], tuple[int, ...]]


class ReferenceExecutor:
    """Executes a function whose first `len(inputs)` arguments are fed per call and
    whose remaining arguments are weights bound once, by argument name."""

    def __init__(
        self,
        module: ModuleOp | func.FuncOp,
        weights: Mapping[str, torch.Tensor],
        num_inputs: int | None = None,
    ):
        function = entry_function(module)
        args = function.body.block.args
        names = [a.name_hint or f"arg{i}" for i, a in enumerate(args)]
        if num_inputs is None:
            num_inputs = sum(1 for n in names if n not in weights)
        missing = [n for n in names[num_inputs:] if n not in weights]
        if missing:
            raise ForgeError(f"no tensor given for weight argument(s): {', '.join(missing)}")
        self.num_inputs = num_inputs
        self.input_names = names[:num_inputs]

        slots: dict[SSAValue, int] = {a: i for i, a in enumerate(args)}
        self._template: list[Any] = [None] * len(args)
        for i in range(num_inputs, len(args)):
            self._template[i] = weights[names[i]]

        steps: list[Step] = []
        self._ops: list[Operation] = []
        results: tuple[int, ...] = ()
        for op in function.body.block.ops:
            if isinstance(op, func.ReturnOp):
                results = tuple(slots[v] for v in op.arguments)
                continue
            outputs = []
            for r in op.results:
                slots[r] = len(self._template)
                self._template.append(None)
                outputs.append(slots[r])
            steps.append((cpu_kernel(op), tuple(slots[v] for v in op.operands), tuple(outputs)))
            self._ops.append(op)
        writes = contract.write_backs(function)
        self._steps = steps
        self._results = results[: len(results) - len(writes)]
        self._writes = tuple((results[r], a) for r, a in contract.copied_write_backs(function))
        """(result slot, argument slot): state copied back after a call (an
        `npu.cache_update` wrote its state during the call already)."""
        self._slots = slots

    def trace(self, *inputs: torch.Tensor) -> dict[SSAValue, Any]:
        """Run once and return every value of the function (for per-op measurements)."""
        env = self._run(inputs)
        return {value: env[slot] for value, slot in self._slots.items()}

    def __call__(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        env = self._run(inputs)
        with torch.no_grad():
            for result, state in self._writes:
                env[state].copy_(env[result])
        return tuple(env[i] for i in self._results)

    def _run(self, inputs: Sequence[torch.Tensor]) -> list[Any]:
        if len(inputs) != self.num_inputs:
            raise ForgeError(f"expected {self.num_inputs} inputs, got {len(inputs)}")
        env = self._template.copy()
        env[: self.num_inputs] = inputs
        with torch.no_grad():
            for index, (kernel, ins, outs) in enumerate(self._steps):
                try:
                    result = kernel(*[env[i] for i in ins])
                except (RuntimeError, ValueError, TypeError, IndexError) as e:
                    # torch rejected the op's operands: say which op, where
                    raise op_error(self._ops[index], f"failed to run: {e}") from e
                if len(outs) == 1:
                    env[outs[0]] = result
                elif outs:
                    for slot, value in zip(outs, result, strict=True):
                        env[slot] = value
        return env
