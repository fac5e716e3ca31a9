"""NNFactory is real here: graphs compile and run (on OpenVINO's CPU plugin without an NPU)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from forge.conversion.nnfactory_backend import load_backend
from forge.runtime.doctor import smoke_test


def test_linear_gelu_softmax_matches_torch() -> None:
    result = smoke_test()
    assert result.ok, result.summary()
    assert result.max_abs_error <= 1e-3


@pytest.mark.parametrize("shape", [(4, 16, 8), (16, 128, 64)])
def test_matmul_softmax_graph(shape: tuple[int, int, int]) -> None:
    m, k, n = shape
    backend = load_backend()
    rng = np.random.default_rng(1)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((n, k)).astype(np.float16)
    factory = backend.NNFactory()
    lhs = factory.parameter((m, k), np.float16)
    rhs = factory.parameter((n, k), np.float16)
    factory.softmax(factory.matmul(lhs, rhs, False, True), -1)
    factory.compile()
    out = factory.run(a, b).astype(np.float32)
    expected = torch.softmax(torch.from_numpy(a).float() @ torch.from_numpy(b).float().T, -1)
    # The output is a real distribution, not a constant the comparison would miss.
    assert out.shape == (m, n)
    assert np.allclose(out.sum(-1), 1.0, atol=1e-2)
    assert float(out.max() - out.min()) > 0.1
    assert np.abs(out - expected.numpy()).max() <= 2e-3


def test_wrong_weights_are_detected() -> None:
    """The comparison used above can fail: a transposed weight gives a large error."""
    backend = load_backend()
    rng = np.random.default_rng(2)
    x = rng.standard_normal((8, 8)).astype(np.float16)
    w = rng.standard_normal((8, 8)).astype(np.float16)
    factory = backend.NNFactory()
    factory.linear(factory.parameter((8, 8), np.float16), 8, 8, bias=False)
    factory.compile()
    out = factory.run(x, w).astype(np.float32)
    xt, wt = torch.from_numpy(x).float(), torch.from_numpy(w).float()
    assert np.abs(out - (xt @ wt.T).numpy()).max() < 0.1
    assert np.abs(out - (xt @ wt).numpy()).max() > 1.0


def test_backend_import_skips_package_root() -> None:
    """Loading NNFactory must not pull transformers/neural-compressor via the package root."""
    code = (
        "import sys; from forge.conversion.nnfactory_backend import load_backend; load_backend(); "
        "print('neural_compressor' in sys.modules, 'transformers' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("NNFACTORY_SNIPPETS_MODE", "bogus"),
        ("NNFACTORY_INFERENCE_PRECISION", "fp32"),
        ("NNFACTORY_PERFORMANCE_MODE", "FAST"),
        ("NNFACTORY_FIRST_INFERENCE", "yes"),
        ("NNFACTORY_DYNAMIC_QUANTIZATION_GROUP_SIZE", "-5"),
        ("NNFACTORY_DYNAMIC_QUANTIZATION_GROUP_SIZE", "abc"),
    ],
)
def test_an_environment_value_openvino_would_abort_on_is_one_line(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    """OpenVINO throws on an unknown property value, and a C++ exception through ctypes
    aborts the process (exit 134): the value is refused before any graph is built."""
    from forge.support.diagnostics import ForgeError

    monkeypatch.setenv(name, value)
    with pytest.raises(ForgeError, match=f"{name}='{value}': expected"):
        load_backend()


def test_known_environment_values_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NNFACTORY_SNIPPETS_MODE", "ENABLE")
    monkeypatch.setenv("NNFACTORY_INFERENCE_PRECISION", "f32")
    monkeypatch.setenv("NNFACTORY_DYNAMIC_QUANTIZATION_GROUP_SIZE", "32")
    assert load_backend().NNFactory is not None
