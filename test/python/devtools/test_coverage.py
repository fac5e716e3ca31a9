"""The coverage sweep: the tiny-config rules on a sample of real transformers types
(configs and models only, no generation), the failure classifier on canned error lines,
the record's table and docs page, and one real case end to end in its own process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from forge.cli import main
from forge.devtools import coverage_report
from forge.devtools.coverage import CaseResult, child_case, classify, crashed
from forge.devtools.tiny_configs import (
    HIDDEN,
    LAYERS,
    VOCAB,
    decoder_types,
    excluded,
    shrunk,
    tiny_config,
    tiny_kwargs,
    tiny_model,
)
from forge.support.diagnostics import ForgeError

SAMPLE = (
    "llama",
    "gpt2",
    "qwen3_moe",
    "deepseek_v2",
    "gemma2",
    "mixtral",
    "falcon",
    "jamba",
)
"""Dense, GPT-2 names, MoE, MLA with complex rotary, sliding windows, a hybrid."""


def test_the_kept_types_follow_the_documented_rule() -> None:
    kept = decoder_types()
    assert set(SAMPLE) <= set(kept)
    assert excluded("bart") == "encoder-decoder"
    assert excluded("bert") is not None and "encoder-only" in excluded("bert")
    assert excluded("mllama") is not None and "multimodal" in excluded("mllama")
    assert all(excluded(t) is None for t in kept)


@pytest.mark.parametrize("model_type", SAMPLE)
def test_tiny_configs_shrink_every_size(model_type: str) -> None:
    config = tiny_config(model_type)
    sizes = config.to_dict()
    hidden = getattr(config, "hidden_size", None) or getattr(config, "n_embd", None)
    assert hidden == HIDDEN
    assert config.num_hidden_layers == LAYERS
    assert config.vocab_size == VOCAB
    for name, value in sizes.items():
        if isinstance(value, list) and name.endswith("layer_types"):
            assert len(value) == LAYERS
    model = tiny_model(model_type)
    parameters = sum(p.numel() for p in model.parameters())
    assert parameters < 5_000_000
    matrix = next(p for p in model.parameters() if p.dim() >= 2)
    assert 0.2 < float(matrix.detach().std()) < 0.4  # redrawn, not the 0.02 default
    assert not model.training
    with torch.no_grad():
        assert tiny_model(model_type).state_dict().keys() == model.state_dict().keys()


def test_hybrid_layer_lists_keep_one_layer_of_each_kind() -> None:
    kinds = ["linear_attention"] * 3 + ["full_attention"]
    out = shrunk({"num_hidden_layers": 4, "layer_types": kinds * 1})
    assert out["layer_types"] == ["linear_attention", "full_attention"]
    nested = shrunk({"patcher_config": {"hidden_size": 768, "num_hidden_layers": 14}})
    assert nested["patcher_config"] == {"hidden_size": HIDDEN, "num_hidden_layers": LAYERS}


def test_experts_per_token_left_none_is_set_where_there_are_experts() -> None:
    kwargs = tiny_kwargs("deepseek_v2")
    assert kwargs["num_experts_per_tok"] == 2
    assert kwargs["n_routed_experts"] == 4


@pytest.mark.parametrize(
    ("line", "cause"),
    [
        (
            "error: static generation does not support recurrent (SSM / linear-attention) states",
            "recurrent/SSM state",
        ),
        (
            "error: static generation does not support cache layer 0 of kind StaticIndexedLayer",
            "indexed cache",
        ),
        (
            "error: capture failed: Could not guard on data-dependent expression u0 < 8",
            "data-dependent shape",
        ),
        ("error: symbolic size 'item' of a tensor", "data-dependent shape"),
        ("error: unsupported dtype torch.complex64 of %12", "complex dtype"),
        ("internal error: KeyError: 'sliding_attention' at static_cache.py:120", "internal error"),
        ("error: unsupported: ctrl: a model without num_hidden_layers", "unsupported"),
        ("killed after 300 s", "timeout"),
        (
            "error: RwkvForCausalLM wrote none of its 2 cache layers in an eager step",
            "forward ignores the cache",
        ),
        (
            "error: static generation does not support cache layer 0 of kind FooLayer",
            "cache layer kind",
        ),
        (
            "error: torch.export could not capture StaticCacheLM: scaled_dot_product_attention"
            "(): argument 'is_causal' must be bool, not SymBool",
            "data-dependent shape",
        ),
        ("something else entirely", "other"),
    ],
)
def test_classify_names_the_cause(line: str, cause: str) -> None:
    assert classify(line) == cause


def test_the_models_own_failures_are_not_forges() -> None:
    line = "internal error: KeyError: 'full_attention' at modeling_cohere_compass.py:80"
    assert classify(line, "eager") == "eager model fails"
    assert classify(line, "compile") == "internal error"
    assert classify("error: unsupported: blt: 193 M parameters", "build") == "unsupported"


def test_a_dead_case_is_a_row() -> None:
    assert crashed("gpt2", "killed after 300 s").cause == "timeout"
    assert crashed("gpt2", "Segmentation fault").cause == "crash"


def test_record_round_trips_into_the_table_and_the_page(tmp_path: Path) -> None:
    rows = [
        CaseResult(
            "llama",
            "LlamaForCausalLM",
            "pass",
            agree=8,
            total=8,
            segments={"prefill": 1, "decode": 1},
            paged_layers=2,
            attention_layers=2,
        ),
        CaseResult(
            "mamba",
            status="fail",
            phase="compile",
            error="error: recurrent",
            cause="recurrent/SSM state",
        ),
    ]
    data = coverage_report.record(rows, {"bart": "encoder-decoder"}, "Test CPU", 60.0, {})
    path = tmp_path / "coverage.json"
    path.write_text(json.dumps(data))
    assert coverage_report.rows_of(coverage_report.load(path)) == rows
    counts = dict(coverage_report.summary(rows))
    assert counts["generate, tokens identical to eager"] == 1
    assert counts["... recurrent/SSM state"] == 1
    page = coverage_report.markdown(data)
    assert "Test CPU" in page and "| llama | pass | 8/8 | 1/1 | 2/2 |" in page
    assert "- encoder-decoder (1): bart" in page
    out = tmp_path / "coverage.md"
    assert main(["coverage", "--from", str(path), "--markdown", str(out)]) == 0
    assert out.read_text() == page


def test_a_rerun_replaces_its_rows() -> None:
    old = [CaseResult("a", status="fail", error="x"), CaseResult("b", status="pass")]
    previous = coverage_report.record(old, {}, "CPU", 600.0, {})
    rerun = coverage_report.record([CaseResult("a", status="pass")], {}, "CPU", 5.0, {})
    data = coverage_report.merged(previous, rerun)
    assert [(r.model_type, r.status) for r in coverage_report.rows_of(data)] == [
        ("a", "pass"),
        ("b", "pass"),
    ]
    assert data["seconds"] == 600.0


def test_a_bad_record_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("{}")
    with pytest.raises(ForgeError, match="not a coverage record"):
        coverage_report.load(path)
    assert main(["coverage", "--types", "bart"]) == 1  # left out: named, no traceback


def test_one_case_end_to_end_in_its_own_process() -> None:
    row = child_case("afmoe")  # MoE routing: CPU-placed ATen ops cut its graph
    assert row.status == "pass", row.error
    assert row.agree == row.total == 8
    assert row.segments["decode"] > 1 and row.paged_layers == row.attention_layers == 2
    assert "aten.topk.default" in row.cpu_ops  # a generic op is named by its ATen op
    assert "npu.generic" not in row.cpu_ops
