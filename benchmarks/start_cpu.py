"""CPU from a fresh interpreter to a served agent card: ours and a plain a2a-sdk app.

``python -m benchmarks.start_cpu [--rounds 5] [--before REV]``

Each run starts a new process and polls ``/.well-known/agent-card.json`` once every
20 ms; the figure is the process's user + system CPU (``/proc/<pid>/stat``) read as
the first 200 answers, which is nearly all imports. The systems, interleaved per round:

- O memory: ``apcore-a2a serve --extensions-dir examples/extensions`` (default store)
- O SQLite: the same with ``--task-store sqlite:///<fresh file>``
- S memory / S SQLite: ``python -m benchmarks.serve plain`` (the SDK's app, ``apps.py``)
- with ``--before REV``, O memory and O SQLite again as of commit REV (its ``apcore_a2a/``
  and ``examples/``, exported by ``git archive`` to a folder the process starts in, so it
  imports that package): a before/after pair measured under the same load

Bytecode is written and reused (``PYTHONDONTWRITEBYTECODE`` is unset for the children
and one unmeasured start of each warms the cache), as for a deployed agent. Prints the
Markdown table: median (min-max) over rounds, and the modules each imported by its first
card (one more start under ``-X importtime``, one line per module): a count that does not
depend on the machine's load, where the CPU figures on a shared machine vary by ±20%.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from benchmarks._proc import CARD_PATH, ROOT, cpu_seconds, free_port, stop

Command = Callable[[int, Path], list[str]]
#: a label, its command (given a port and a fresh database file) and the folder it starts in
System = tuple[str, Command, Path]

OURS: list[tuple[str, Command]] = [
    (
        "O memory",
        lambda port, _db: [
            sys.executable, "-m", "apcore_a2a", "serve", "--host", "127.0.0.1",
            "--port", str(port), "--extensions-dir", "examples/extensions",
        ],
    ),
    (
        "O SQLite",
        lambda port, db: [
            sys.executable, "-m", "apcore_a2a", "serve", "--host", "127.0.0.1",
            "--port", str(port), "--extensions-dir", "examples/extensions",
            "--task-store", f"sqlite:///{db}",
        ],
    ),
]  # fmt: skip
PLAIN: list[tuple[str, Command]] = [
    (
        "S memory",
        lambda port, _db: [
            sys.executable, "-m", "benchmarks.serve", "plain", "--port", str(port),
        ],
    ),
    (
        "S SQLite",
        lambda port, db: [
            sys.executable, "-m", "benchmarks.serve", "plain", "--port", str(port),
            "--task-store", f"sqlite:///{db}",
        ],
    ),
]  # fmt: skip


def exported(rev: str, into: Path) -> Path:
    """The folder *into* holding ``apcore_a2a/`` and ``examples/`` as of commit *rev*."""
    archive = subprocess.run(
        ["git", "archive", rev, "apcore_a2a", "examples"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def cpu_to_card(
    cmd: Command, cwd: Path = ROOT, timeout: float = 60.0, importtime: Path | None = None
) -> float:
    """Seconds of CPU a fresh process of *cmd*, started in *cwd*, spent until its card
    first answered; with *importtime*, run under ``-X importtime`` into that file."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory(prefix="bench-start-") as tmp:
        args = cmd(port, Path(tmp) / "tasks.db")
        if importtime is not None:
            args[1:1] = ["-X", "importtime"]
        err = importtime.open("wb") if importtime is not None else subprocess.DEVNULL
        proc = subprocess.Popen(args, cwd=str(cwd), env=env, stdout=subprocess.DEVNULL, stderr=err)
        try:
            deadline = time.monotonic() + timeout
            with httpx.Client(timeout=1.0) as http:
                while time.monotonic() < deadline:
                    if proc.poll() is not None:
                        raise RuntimeError(f"{cmd(port, Path(tmp))} exited {proc.returncode}")
                    try:
                        if http.get(f"http://127.0.0.1:{port}{CARD_PATH}").status_code == 200:
                            return cpu_seconds(proc.pid)
                    except httpx.HTTPError:
                        pass
                    time.sleep(0.02)
            raise RuntimeError(f"no card within {timeout}s")
        finally:
            if importtime is not None:
                err.close()  # type: ignore[union-attr]
            stop(proc)


def imported(cmd: Command, cwd: Path, tmp: Path) -> int:
    """How many modules a fresh process of *cmd* imported by its first served card (it is
    stopped then; its ``-X importtime`` lines up to that moment)."""
    log = tmp / "importtime.txt"
    cpu_to_card(cmd, cwd, importtime=log)
    lines = log.read_text(errors="replace").splitlines()
    return sum(1 for line in lines if line.startswith("import time:") and "|" in line) - 1


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.start_cpu")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--before", metavar="REV", help="also ours as of commit REV")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-before-") as tmp:
        systems: list[System] = [(label, cmd, ROOT) for label, cmd in OURS]
        if args.before:
            before = exported(args.before, Path(tmp))
            systems += [(f"{label} @{args.before}", cmd, before) for label, cmd in OURS]
        systems += [(label, cmd, ROOT) for label, cmd in PLAIN]
        for _label, cmd, cwd in systems:  # bytecode written, files cached: not measured
            cpu_to_card(cmd, cwd)
        runs: dict[str, list[float]] = {label: [] for label, _, _ in systems}
        for _ in range(args.rounds):
            for label, cmd, cwd in systems:
                runs[label].append(cpu_to_card(cmd, cwd))
        modules = {label: imported(cmd, cwd, Path(tmp)) for label, cmd, cwd in systems}
    print("| system | CPU to card, s: median (min-max) | modules imported |")
    print("| --- | --- | --- |")
    for label, values in runs.items():
        print(
            f"| {label} | {statistics.median(values):.2f} "
            f"({min(values):.2f}-{max(values):.2f}) | {modules[label]} |"
        )


if __name__ == "__main__":
    main()
