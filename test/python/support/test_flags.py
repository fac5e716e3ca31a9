"""Numeric flags out of range are the parser's one-line error naming the flag and the
range, on every command that takes them: never an overflow inside torch (`--seed
99999999999999999999999` was `internal error: Overflow when unpacking long long`)."""

from __future__ import annotations

import pytest

from forge.cli import main
from forge.support.flags import MAX_COUNT, MAX_SEED, MAX_THREADS

HUGE = "99999999999999999999999"

SEEDS = [["generate", "gpt2"], ["bench", "--generate"], ["fuzz-ir"], ["fuzz-models"], ["calibrate"]]
COUNTS = [
    ["generate", "gpt2", "--max-new-tokens"],
    ["generate", "gpt2", "--capacity"],
    ["generate", "gpt2", "--prompt-capacity"],
    ["generate", "gpt2", "--top-k"],
    ["compile", "--seq"],
    ["compile", "--runs"],
    ["bench", "--runs"],
    ["bench", "--rounds"],
    ["bench", "--compile-repeats"],
    ["bench", "--generate", "--processes"],
    ["fuzz-ir", "--ray-workers"],
]
SIZES = [["generate", "gpt2", "--prompt-len"], ["fuzz-ir", "--cases"], ["fuzz-models", "--cases"]]


def _flag_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "internal error" not in err
    return err


@pytest.mark.parametrize("command", SEEDS, ids=" ".join)
@pytest.mark.parametrize("value", [HUGE, "-1", str(MAX_SEED + 1), "nan", "1e3"])
def test_seeds_out_of_range(
    command: list[str], value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _flag_error([*command, "--seed", value], capsys)
    assert err == (
        f"forge: error: argument --seed: expected an integer from 0 to {MAX_SEED}, got '{value}'"
    )


@pytest.mark.parametrize("command", COUNTS, ids=" ".join)
@pytest.mark.parametrize("value", [HUGE, "0", "-3", str(MAX_COUNT + 1), "inf"])
def test_counts_out_of_range(
    command: list[str], value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _flag_error([*command, value], capsys)
    assert f"argument {command[-1]}: expected an integer from 1 to {MAX_COUNT}" in err


@pytest.mark.parametrize("command", SIZES, ids=" ".join)
@pytest.mark.parametrize("value", [HUGE, "-1", "nan"])
def test_sizes_out_of_range(
    command: list[str], value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _flag_error([*command, value], capsys)
    assert f"argument {command[-1]}: expected an integer from 0 to {MAX_COUNT}" in err


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400", "0", "-1", "warm"])
def test_temperature_is_a_finite_positive_number(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _flag_error(["generate", "gpt2", f"--temperature={value}"], capsys)
    expected = f"argument --temperature: expected a finite number above 0, got '{value}'"
    assert err == f"forge: error: {expected}"


@pytest.mark.parametrize("value", [HUGE, "0", str(MAX_THREADS + 1)])
def test_threads_are_bounded(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    """torch and OpenVINO start every thread asked for."""
    err = _flag_error(["bench", "--threads", value], capsys)
    assert f"argument --threads: expected an integer from 1 to {MAX_THREADS}" in err


@pytest.mark.parametrize("value", [HUGE, "0", "1e9"])
def test_fuzz_timeout_is_bounded(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`signal.alarm` overflowed on a huge timeout."""
    err = _flag_error(["fuzz-ir", "--timeout", value], capsys)
    assert "argument --timeout: expected an integer from 1 to 604800" in err


def test_prompt_longer_than_the_cache_is_refused_before_it_is_drawn(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A random prompt of 2^31 - 1 ids (16 GiB) is checked against the cache first."""
    argv = ["generate", "gpt2", "--tiny", "--prompt-len", str(MAX_COUNT), "--capacity", "32"]
    err = _flag_error(argv, capsys)
    assert f"prompt of {MAX_COUNT} tokens does not fit the cache of 32 positions" in err
