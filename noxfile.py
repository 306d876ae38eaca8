"""Developer sessions: ``nox -s tests lint typecheck`` (and ``bench``, ``reliability``)."""

from __future__ import annotations

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
