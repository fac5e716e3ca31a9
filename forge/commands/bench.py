"""`forge bench`: compile time and latency vs eager, inductor, OpenVINO, ONNX Runtime."""

from __future__ import annotations

import argparse
from typing import Any

from forge.support import flags
from forge.support.files import atomic_write


class BackendsOption(argparse.Action):
    """`--backends B,...`, whose help lists the registered bench backends. The registry
    is read only when help is shown: it imports torch, too slow for `forge` start-up."""

    @property
    def help(self) -> str:
        # Imported when help is shown, not at `forge` start-up (torch takes seconds).
        from forge.devtools.bench import backend_names
        from forge.devtools.bench_generate import row_names

        return (
            f"comma-separated subset of {','.join(backend_names())}; "
            f"with --generate: of {','.join(row_names())}"
        )

    @help.setter
    def help(self, _: str | None) -> None:
        """argparse stores the constructor's `help` here; the property above wins."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, values)


def add_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "bench", help="compile time and latency vs eager, inductor, OpenVINO, ONNX Runtime"
    )
    parser.add_argument("model", nargs="?", default="gpt2", help="model (default gpt2)")
    parser.add_argument("--seq", type=flags.count, default=128)
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument(
        "--runs", type=flags.count, default=40, help="timed runs per backend (default 40)"
    )
    parser.add_argument("--threads", type=flags.threads, default=None, help="default: all cores")
    parser.add_argument("--backends", default="all", action=BackendsOption)
    parser.add_argument("--json", dest="json_path", help="also write the results here")
    parser.add_argument(
        "--bench-python",
        help="python of the bench venv, where the newest OpenVINO and ONNX Runtime run "
        "(default $FORGE_BENCH_PYTHON, else build/venv-bench/bin/python; "
        "scripts/bench.sh builds it)",
    )
    parser.add_argument(
        "--compile-repeats",
        type=flags.count,
        default=3,
        help="fresh-process compiles per backend; the median is reported (default 3)",
    )
    parser.add_argument(
        "--rounds",
        type=flags.count,
        default=None,
        help="interleaved timing rounds (default 10); with --generate: timed generate "
        "calls per backend after one warm-up, the median reported (default 3)",
    )
    generate = parser.add_argument_group(
        "--generate",
        "token generation: Forge's compile_lm vs HF eager, HF static cache + torch.compile "
        "and OpenVINO GenAI (fp32 and int8 weights; its venv: scripts/bench_generate.sh)",
    )
    generate.add_argument(
        "--generate", action="store_true", help="benchmark generation instead of one forward"
    )
    generate.add_argument("--prompt-len", type=flags.count, default=100, help="default 100")
    generate.add_argument("--max-new-tokens", type=flags.count, default=32, help="default 32")
    generate.add_argument(
        "--prompt-capacity",
        type=flags.count,
        help="Forge's prefill size (default: the prompt length)",
    )
    generate.add_argument(
        "--seed", type=flags.seed, default=0, help="random prompt seed (default 0)"
    )
    generate.add_argument(
        "--processes",
        type=flags.count,
        default=1,
        help="fresh processes per row, one after another, each timed for --rounds rounds "
        "(default 1): two processes of one program can differ by 20-40%%",
    )
    generate.add_argument(
        "--genai-python",
        help="python of the OpenVINO GenAI venv (default $FORGE_GENAI_PYTHON, else "
        "build/venv-genai/bin/python)",
    )


def run(ns: argparse.Namespace) -> int:
    # Imported when the command runs, not at `forge` start-up (torch and xDSL take seconds).
    import json
    from pathlib import Path

    from forge.devtools.bench import backend_names, run_bench

    if ns.generate:
        return _run_generate(ns)
    backends = backend_names() if ns.backends == "all" else tuple(ns.backends.split(","))
    report = run_bench(
        ns.model,
        backends,
        seq=ns.seq,
        runs=ns.runs,
        threads=ns.threads,
        tiny=ns.tiny,
        progress=lambda line: print(line, flush=True),
        rounds=10 if ns.rounds is None else ns.rounds,
        compile_repeats=ns.compile_repeats,
        bench_python=Path(ns.bench_python) if ns.bench_python else None,
    )
    print(report.format())
    if ns.json_path:
        with atomic_write(ns.json_path) as f:
            json.dump(report.to_json(), f, indent=2)
        print(f"wrote {ns.json_path}")
    failed = [r for r in report.results.values() if r.skipped.startswith("failed")]
    return 1 if failed or (report.ran("forge") is None and "forge" in backends) else 0


def _run_generate(ns: argparse.Namespace) -> int:
    # Imported when the command runs, not at `forge` start-up (torch takes seconds).
    import json
    import os
    from pathlib import Path

    from forge.devtools.bench_generate import (
        GenerateSpec,
        row_names,
        run_generate_bench,
    )

    rows = row_names() if ns.backends == "all" else tuple(ns.backends.split(","))
    spec = GenerateSpec(
        model=ns.model,
        tiny=ns.tiny,
        prompt_len=ns.prompt_len,
        max_new_tokens=ns.max_new_tokens,
        seed=ns.seed,
        rounds=3 if ns.rounds is None else ns.rounds,
        threads=ns.threads or os.cpu_count() or 1,
        prompt_capacity=ns.prompt_capacity,
        processes=ns.processes,
    )
    report = run_generate_bench(
        spec,
        rows,
        genai_python=Path(ns.genai_python) if ns.genai_python else None,
        progress=lambda line: print(line, flush=True),
    )
    print(report.format())
    if ns.json_path:
        with atomic_write(ns.json_path) as f:
            json.dump(report.to_json(), f, indent=2)
        print(f"wrote {ns.json_path}")
    failed = [r for r in report.results.values() if r.skipped and not r.backend.startswith("genai")]
    return 1 if failed else 0
