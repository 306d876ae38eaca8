"""Writing config files and running the ``apcore-a2a`` command for the config tests."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from tests._support import ROOT, run_python

EXTENSIONS = ROOT / "examples" / "extensions"
BINDINGS = ROOT / "examples" / "bindings"


def write(folder: Path, text: str, name: str = "agent.yaml") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def clean_env(**extra: str) -> dict[str, str]:
    """The process environment without any setting variable, plus *extra*."""
    from apcore_a2a.settings import ENV_VARS

    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    env.update(extra)
    return env


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m apcore_a2a ARGS`` at the repository root, forked when it can be."""
    return run_python(
        [sys.executable, "-m", "apcore_a2a", *args],
        env=env if env is not None else clean_env(),
    )


def error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The one line a failed command printed on stderr (log warnings left out)."""
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("Error: ")]
    assert len(lines) == 1, result.stderr
    return lines[0]


class InProcessCLI:
    """Run `apcore-a2a` subcommands in this process (no interpreter start-up per call).

    Uses the real parser and command functions; only ``main()``'s logging setup and
    ``sys.exit`` are left out. The environment holds no setting variables but *env*.
    """

    def __init__(self, monkeypatch: Any, capsys: Any) -> None:
        self.monkeypatch = monkeypatch
        self.capsys = capsys

    def __call__(
        self, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        from apcore_a2a.cli import build_parser
        from apcore_a2a.settings import ENV_VARS

        with self.monkeypatch.context() as patch:
            patch.chdir(ROOT)
            for name in ENV_VARS:
                patch.delenv(name, raising=False)
            for name, value in (env or {}).items():
                patch.setenv(name, value)
            self.capsys.readouterr()
            try:
                parsed = build_parser().parse_args(list(args))
                code = parsed.func(parsed)
            except SystemExit as exc:
                code = int(exc.code or 0)
            out, err = self.capsys.readouterr()
        return subprocess.CompletedProcess(list(args), code, out, err)
