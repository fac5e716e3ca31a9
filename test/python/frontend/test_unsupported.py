"""A model whose own code fails on the static cache is one located line naming the
model type and the construct (forge.frontend.unsupported), never an internal error:
real transformers models at the coverage sweep's tiny configs."""

from __future__ import annotations

import pytest

from forge.devtools.tiny_configs import tiny_model
from forge.frontend.static_cache import capture_programs
from forge.support.diagnostics import ForgeError


def _refusal(model_type: str) -> ForgeError:
    model = tiny_model(model_type)
    with pytest.raises(ForgeError) as caught:
        capture_programs(model, 32, 8)
    return caught.value


def test_a_cache_layer_kind_without_a_static_layer() -> None:
    error = _refusal("deepseek_v4")
    assert "unsupported: deepseek_v4: cache layer kind 'heavily_compressed_attention'" in str(error)
    assert error.location is not None and error.location.startswith("transformers/cache_utils.py:")


def test_a_model_with_a_cache_of_its_own() -> None:
    error = _refusal("cpmant")
    assert "unsupported: cpmant: a cache of its own" in str(error)
    assert error.location is not None
    assert error.location.startswith("transformers/models/cpmant/modeling_cpmant.py:")


def test_a_model_that_adds_cache_layers_in_its_forward() -> None:
    error = _refusal("dory")  # looped layers: copies of the cache layers per loop
    assert "unsupported: dory: its forward adds" in str(error)
    assert error.location == "transformers/models/dory/modeling_dory.py"
