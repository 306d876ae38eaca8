"""A setting that is a number of seconds, or a list of them, takes a finite number.

``inf`` (and ``nan``) parse as floats, from an environment variable and from YAML
(``.inf``) alike. Let through, an infinite ``shutdown_timeout`` crashed ``serve`` with a
traceback, and an infinite ``execution_timeout`` stopped it with a line naming another
setting. Each is refused with one line naming the variable or key, before anything starts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._support import free_port

from ._helpers import EXTENSIONS, InProcessCLI, clean_env, error_line, run_cli, write


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> InProcessCLI:
    return InProcessCLI(monkeypatch, capsys)


@pytest.mark.parametrize(
    "name", ["A2A_SHUTDOWN_TIMEOUT", "A2A_EXECUTION_TIMEOUT", "A2A_SHUTDOWN_FORCE_TIMEOUT"]
)
def test_serve_refuses_an_infinite_timeout_in_one_line(name: str) -> None:
    result = run_cli(
        "serve",
        *("--extensions-dir", str(EXTENSIONS), "--port", str(free_port())),
        env=clean_env(**{name: "inf"}),
    )
    assert result.returncode == 1, result
    assert error_line(result) == f"Error: {name}: input should be a finite number, got 'inf'"
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1,inf"])
def test_config_show_refuses_non_finite_retry_delays(cli: InProcessCLI, value: str) -> None:
    result = cli("config", "show", env={"A2A_PUSH_RETRY_DELAYS": value})
    assert result.returncode == 1, result
    message = error_line(result)
    assert message.startswith("Error: A2A_PUSH_RETRY_DELAYS"), message
    assert "finite number" in message


def test_a_file_with_an_infinite_timeout_names_its_key(cli: InProcessCLI, tmp_path: Path) -> None:
    path = write(tmp_path, "limits:\n  shutdown_timeout: .inf\n")
    result = cli("config", "show", "--config", str(path))
    assert result.returncode == 1, result
    message = error_line(result)
    assert "limits.shutdown_timeout" in message and "finite number" in message, message
