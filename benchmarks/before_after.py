"""Before/after: blocking SendMessage at c=16 on another checkout vs this one, interleaved.

``python -m benchmarks.before_after OLD_CHECKOUT [--rounds N] [--seconds S]``

OLD_CHECKOUT is a git worktree of an earlier commit with its own ``.venv`` (``python3 -m
venv .venv && .venv/bin/pip install -e '.[dev]'``). Three servers run side by side, each
``python -m benchmarks.serve`` of its own tree under one uvicorn worker: the old ours,
this ours and the plain a2a-sdk server (this tree). wrk drives them in turn, round after
round, so a machine that gets busier or quieter affects all three alike; the report is
the median requests/s of each and the ratios after/before and after/plain.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import subprocess
import tempfile
from pathlib import Path

from benchmarks._proc import CARD_PATH, ROOT, _wait_ready, free_port
from benchmarks._wrk import run_wrk


def _start(root: Path, kind: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    log = Path(tempfile.mkstemp(prefix=f"bench-{kind}-", suffix=".log")[1])
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [str(root / ".venv" / "bin" / "python"), "-m", "benchmarks.serve", kind,
             "--port", str(port)],
            cwd=str(root), stdout=sink, stderr=subprocess.STDOUT,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    _wait_ready(base + CARD_PATH, proc, log, 60)
    return proc, base


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.before_after")
    parser.add_argument("old", type=Path, help="checkout of the earlier commit, with .venv")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args(argv)
    servers = {
        "before": _start(args.old.resolve(), "ours"),
        "after": _start(ROOT, "ours"),
        "plain": _start(ROOT, "plain"),
    }
    rps: dict[str, list[float]] = {name: [] for name in servers}
    try:
        for _proc, base in servers.values():
            run_wrk(base + "/", "send", connections=16, duration=2)  # warm-up
        for round_ in range(args.rounds):
            for name, (_proc, base) in servers.items():
                result = run_wrk(base + "/", "send", connections=16, duration=args.seconds)
                rps[name].append(result.rps)
                print(f"round {round_}: {name:<6} {result.rps:8.1f} req/s  failed {result.failed}")
    finally:
        for proc, _base in servers.values():
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    median = {name: statistics.median(values) for name, values in rps.items()}
    print("median req/s:", {name: round(value, 1) for name, value in median.items()})
    print(
        f"after/before {median['after'] / median['before']:.3f}  "
        f"after/plain {median['after'] / median['plain']:.3f}  "
        f"before/plain {median['before'] / median['plain']:.3f}"
    )


if __name__ == "__main__":
    main()
