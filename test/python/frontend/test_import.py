"""Phase 1: capture + import reproduce eager PyTorch, and the edges are handled."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from xdsl.context import Context
from xdsl.dialects.arith import Arith
from xdsl.dialects.builtin import Builtin
from xdsl.dialects.func import Func
from xdsl.parser import Parser

from forge.devtools.numerics import compare
from forge.dialects import npu
from forge.dialects.context import entry_function
from forge.frontend import models
from forge.frontend.capture import CaptureError, capture
from forge.frontend.importer import import_program
from forge.runtime.reference import ReferenceExecutor


def import_tiny(name: str, seq: int = 16):
    model = models.build_model(name, tiny=True)
    args, kwargs = models.example_inputs(model, seq=seq)
    program = import_program(capture(model, args, example_kwargs=kwargs))
    program.module.verify()
    return model, args, kwargs, program


@pytest.mark.parametrize("name", list(models.SPECS))
def test_tiny_model_matches_eager(name: str) -> None:
    model, args, kwargs, program = import_tiny(name)
    executor = ReferenceExecutor(program.function, program.weights, len(program.input_names))
    agreement = compare(model, executor, args, kwargs, program.input_names, num_inputs=3)
    assert agreement.max_abs <= 1e-5
    assert agreement.top1 == 1.0


@pytest.mark.parametrize("name", ["gpt2", "lfm2-2.6b"])
def test_printed_ir_parses_back_and_runs_the_same(name: str) -> None:
    _model, args, kwargs, program = import_tiny(name)
    ctx = Context()
    for dialect in (Builtin, Func, Arith, npu.NPU):
        ctx.load_dialect(dialect)
    reparsed = Parser(ctx, str(program.module)).parse_module()
    reparsed.verify()
    assert str(reparsed) == str(program.module)
    inputs = [args[0], kwargs["attention_mask"]]
    direct = ReferenceExecutor(program.function, program.weights, 2)(*inputs)
    from_text = ReferenceExecutor(entry_function(reparsed), program.weights, 2)(*inputs)
    assert torch.equal(direct[0], from_text[0])


def test_tied_weights_are_one_argument_with_two_uses() -> None:
    _, _, _, program = import_tiny("gpt2")
    names = [a.name_hint for a in program.function.body.block.args]
    assert "transformer.wte.weight" in names and "lm_head.weight" not in names
    wte = program.function.body.block.args[names.index("transformer.wte.weight")]
    users = sorted(use.operation.name for use in wte.uses)
    assert users == ["npu.embedding", "npu.linear"]
    assert any("tied weights share one argument" in n for n in program.notes)


class CumsumNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(self.proj(x), dim=-1).flip(0)


def test_unknown_aten_op_becomes_generic_and_still_executes() -> None:
    torch.manual_seed(0)
    model = CumsumNet().eval()
    x = torch.randn(4, 8)
    program = import_program(capture(model, (x,)))
    opcodes = [op.opcode for op in program.function.body.block.ops if isinstance(op, npu.NpuOp)]
    assert "aten.cumsum.default" in opcodes and "aten.flip.default" in opcodes
    assert any(n.startswith("aten.cumsum.default: no named npu op") for n in program.notes)
    executor = ReferenceExecutor(program.function, program.weights, 1)
    for seed in range(3):
        x = torch.randn(4, 8, generator=torch.Generator().manual_seed(seed))
        assert (executor(x)[0] - model(x)).abs().max() <= 1e-5


class KeepRows(torch.nn.Module):
    """transformers' `hidden[:, logits_to_keep]`, and indexing that is not a row gather."""

    def __init__(self, form: str) -> None:
        super().__init__()
        self.form = form

    def forward(self, h: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        h = h * 2
        if self.form == "rows":
            return h[:, idx]
        if self.form == "first_dim":
            return h[0][idx]
        return h[:, idx, idx]


@pytest.mark.parametrize(
    ("form", "shape", "gathered"),
    [
        ("rows", (1, 6, 8), True),
        ("first_dim", (1, 6, 8), True),
        ("two_indices", (1, 6, 6), False),
        ("rows", (2, 6, 8), False),  # a batch of 2 ahead of the rows
    ],
)
def test_row_index_becomes_a_gather(form: str, shape: tuple[int, ...], gathered: bool) -> None:
    """A 1-D index after unit dims is view + npu.embedding + view (a graph can run it);
    other indexing stays `aten.index.Tensor` on the CPU. Same values as eager either way,
    for several index tensors (a repeated one included)."""
    model = KeepRows(form).eval()
    h = torch.randn(*shape)
    program = import_program(capture(model, (h, torch.tensor([5, 0]))))
    names = [op.name for op in program.function.body.block.ops]
    assert ("npu.embedding" in names) == gathered
    generic = [op.opcode for op in program.function.body.block.ops if op.name == "npu.generic"]
    assert ("aten.index.Tensor" in generic) != gathered
    executor = ReferenceExecutor(program.function, program.weights, 2)
    for idx in ([5, 0], [3, 3], [1, 2]):
        x = torch.randn(*shape, generator=torch.Generator().manual_seed(idx[0]))
        index = torch.tensor(idx)
        assert torch.equal(executor(x, index)[0], model(x, index))


class DataDependent(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            return x * 2
        return x - 1


def test_export_rejection_is_a_capture_error() -> None:
    with pytest.raises(CaptureError, match=r"torch\.export could not capture DataDependent"):
        capture(DataDependent(), (torch.randn(3),))


def test_cli_reports_export_rejection_in_one_line(tmp_path: Path) -> None:
    factory = tmp_path / "bad_model.py"
    factory.write_text(
        textwrap.dedent(
            """
            import torch

            class DataDependent(torch.nn.Module):
                def forward(self, x):
                    if x.sum() > 0:
                        return x * 2
                    return x - 1

            def make():
                return DataDependent(), (torch.randn(3),)
            """
        )
    )
    proc = subprocess.run(
        [sys.executable, "-m", "forge.cli", "import", f"{factory}:make"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert lines[0].startswith("forge: error: torch.export could not capture DataDependent")


def test_cli_rejects_unknown_model_in_one_line() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "forge.cli", "import", "no-such-model"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "forge: error: 'no-such-model' is not a model name, checkpoint directory or "
        "path/to/file.py:factory"
    ]


def test_8b_config_imports_on_meta_device() -> None:
    model = models.build_model("llama-3.1-8b")
    assert next(model.parameters()).device.type == "meta"
    args, kwargs = models.example_inputs(model, seq=16)
    program = import_program(capture(model, args, example_kwargs=kwargs))
    attention = models.get_spec("llama-3.1-8b").attention_layers()
    matmuls = sum(1 for op in program.function.body.block.ops if isinstance(op, npu.MatmulOp))
    assert attention == 32 and matmuls == 2 * attention
    assert program.weights["lm_head.weight"].shape == (128256, 4096)


def test_dynamic_shapes_fail_with_a_clear_error() -> None:
    """Dynamic dims import as `?` only once symbolic sizes are supported; until then the
    importer says so in one line instead of producing wrong IR."""
    from torch.export import Dim

    from forge.frontend.importer import UnsupportedGraph

    model = models.build_model("gpt2", tiny=True)
    args, kwargs = models.example_inputs(model, seq=16)
    seq = Dim("seq", min=2, max=64)
    captured = capture(
        model,
        args,
        dynamic_shapes={"input_ids": {1: seq}, "attention_mask": {1: seq}, "use_cache": None},
        example_kwargs=kwargs,
    )
    with pytest.raises(UnsupportedGraph, match="a dynamic shape"):
        import_program(captured)
