"""An auth setting that cannot work alone (``auth_type`` without its keys, roles or
scopes without any authentication) is refused like every other bad value: named where it
was given (flag, variable, config key, keyword argument) and with the value it got. Both
said ``--auth-type bearer requires ...`` / ``--required-roles and --required-scopes need
...``: a flag the operator never typed when the value came from ``A2A_AUTH_TYPE`` or the
file, and no value."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from apcore_a2a import A2AServerFactory
from apcore_a2a.settings import SettingsError
from tests.foundation.modules import build_registry

from ._helpers import EXTENSIONS, InProcessCLI, run_cli, write


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> InProcessCLI:
    return InProcessCLI(monkeypatch, capsys)


BEARER = "requires --auth-key/--auth-key-file"
APIKEY = "requires at least one --api-key/--api-key-file"
ROLES = "requires authentication: give --auth-key/--auth-key-file"


def _said(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, result.stderr
    return next(ln for ln in result.stderr.splitlines() if "requires" in ln)


FLAG_CASES = [
    (["--auth-type", "bearer"], f"--auth-type: {BEARER}", "got 'bearer'"),
    (["--required-roles", "ops"], f"--required-roles: {ROLES}", "got ['ops']"),
]


@pytest.mark.parametrize(("args", "start", "end"), FLAG_CASES)
def test_serve_names_the_flag_and_the_value(
    taken_port: str, args: list[str], start: str, end: str
) -> None:
    result = run_cli("serve", "--extensions-dir", str(EXTENSIONS), "--port", taken_port, *args)
    said = _said(result)
    assert said.startswith(f"Error: {start}") and said.endswith(end), said


ENV_CASES = [
    ("A2A_AUTH_TYPE", "bearer", BEARER, "got 'bearer'"),
    ("A2A_AUTH_TYPE", "apikey", APIKEY, "got 'apikey'"),
    ("A2A_REQUIRED_ROLES", "ops,audit", ROLES, "got ['ops', 'audit']"),
    ("A2A_REQUIRED_SCOPES", "tasks:write", ROLES, "got ['tasks:write']"),
]


@pytest.mark.parametrize(("variable", "value", "problem", "end"), ENV_CASES)
def test_config_check_names_the_variable_and_the_value(
    cli: InProcessCLI, tmp_path: Path, variable: str, value: str, problem: str, end: str
) -> None:
    path = write(tmp_path, f"modules:\n  extensions_dirs: [{EXTENSIONS}]\n")
    said = _said(cli("config", "check", str(path), env={variable: value}))
    assert said.startswith(f"Error: {variable}: {problem}") and said.endswith(end), said


def test_the_config_file_key_is_named(cli: InProcessCLI, tmp_path: Path) -> None:
    text = f"modules:\n  extensions_dirs: [{EXTENSIONS}]\nauth:\n  type: bearer\n"
    said = _said(cli("config", "check", str(write(tmp_path, text))))
    assert said.startswith(f"Error: auth.type: {BEARER}"), said


def test_the_keyword_argument_is_named() -> None:
    with pytest.raises(SettingsError) as caught:
        A2AServerFactory(build_registry(), environ={}, required_roles=["ops"])
    said = str(caught.value)
    assert said.startswith(f"required_roles: {ROLES}") and said.endswith("got ['ops']"), said
