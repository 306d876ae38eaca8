"""Developer sessions: ``nox -s tests lint typecheck`` (and ``bench``, ``reliability``)."""

from __future__ import annotations

import os
from pathlib import Path

import nox

nox.options.sessions = ["tests", "lint", "typecheck"]
nox.options.reuse_existing_virtualenvs = True

PYTHON = ["3.11"]


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Run the whole test suite (the same command CI runs)."""
    session.install("-e", ".[dev]")
    session.run("pytest", "-q", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff check + format check."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """mypy --strict on the package."""
    session.install("-e", ".[dev]")
    session.run("mypy", "--strict", "apcore_a2a")


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Benchmark against a plain a2a-sdk server (``-- --quick`` short, ``-- --smoke`` seconds).

    A full run (no arguments) also runs ``benchmarks.workers`` (SendMessage req/s with 1
    and 2 worker processes on PostgreSQL), ``benchmarks.cluster_streams`` (cross-replica
    delay p50/p90/p99 on PostgreSQL and SQLite, idle queries), ``benchmarks.growth``
    (bytes stored and time per chunk of long streams, replay memory) and
    ``benchmarks.busy_health`` (``/health`` while large bodies arrive, beside the plain SDK).

    Installs Debian's ``wrk`` when it is missing (as root); appends to benchmarks/RESULTS.md.
    """
    import os
    import shutil

    if shutil.which("wrk") is None:
        if shutil.which("apt-get") is None or os.geteuid() != 0:
            session.error("wrk is required: apt-get install -y wrk")
        session.run("apt-get", "update", "-qq", external=True)
        session.run("apt-get", "install", "-y", "-qq", "wrk", external=True)
    # sqlite/metrics only because apcore_a2a.push and server.ops import sqlalchemy and
    # prometheus_client unconditionally; postgres for the cross-replica rows; no
    # OpenTelemetry, as in a plain install; grpc for busy_health's gRPC shape.
    session.install("-e", ".[speed,sqlite,postgres,metrics,grpc]")
    session.run("python", "-m", "benchmarks", *session.posargs)
    if not session.posargs:
        # The workers scaling table (issue 20): 1 and 2 workers, rounds interleaved.
        session.run("python", "-m", "benchmarks.workers", "--append", "benchmarks/RESULTS.md")
        # A full run also measures cross-replica stream delays (issue 23) and appends them
        # to benchmarks/RESULTS.md; it needs the PostgreSQL the tests use.
        session.run(
            "python", "-m", "benchmarks.cluster_streams", "--append", "benchmarks/RESULTS.md"
        )
        # Growth (issue 33): bytes stored and time per chunk of long streams, replay memory.
        session.run("python", "-m", "benchmarks.growth", "--append", "benchmarks/RESULTS.md")
        # /health while large bodies arrive (issue 31), beside the plain SDK server: the
        # figure tests/reliability/test_body_shape.py used to assert (issue 43).
        session.run("python", "-m", "benchmarks.busy_health", "--append", "benchmarks/RESULTS.md")


def _reliability_run(session: nox.Session, paths: list[str], scale: str) -> None:
    tmp = Path(session.create_tmp())
    report, junit = tmp / "reliability.jsonl", tmp / "reliability.xml"
    report.unlink(missing_ok=True)
    env = {
        "A2A_RELIABILITY_SCALE": os.environ.get("A2A_RELIABILITY_SCALE", scale),
        "A2A_RELIABILITY_FULL": "1",
        "A2A_RELIABILITY_REPORT": str(report),
    }
    session.run(
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-o",
        "timeout=3600",
        # one process: these are load tests that measure the machine as a whole
        "-n",
        "0",
        f"--junitxml={junit}",
        *paths,
        *session.posargs,
        env=env,
        success_codes=[0, 1],
    )
    session.run("python", "-m", "tests.reliability.summary", str(report), str(junit))


@nox.session(python=PYTHON)
def reliability(session: nox.Session) -> None:
    """Reliability suite at full size: 10x hostile cases, PostgreSQL restart, soak; prints a table.

    ``A2A_RELIABILITY_SCALE`` changes the multiplier, ``A2A_SOAK_TASKS`` the soak length.
    Restarts the local PostgreSQL cluster (pg_ctlcluster): not for shared CI machines.
    """
    session.install("-e", ".[dev]")
    _reliability_run(session, ["tests/reliability"], "10")


@nox.session(python=PYTHON)
def soak(session: nox.Session) -> None:
    """Only the soak: 200k tasks through the memory store with RSS sampled."""
    session.install("-e", ".[dev]")
    _reliability_run(session, ["tests/reliability/test_soak.py"], "1")
