"""An empty value given on purpose is refused at start, naming where it was given: a flag
(``apcore-a2a serve --name ""``), a ``serve()`` / ``A2AServerFactory`` keyword argument,
a config-file key. It used to be read as "not given": ``--name ""`` served an agent named
``apcore-agent``. ``host`` is the exception ("" listens on every interface). An empty
environment variable still counts as unset (docs/configuration.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from apcore_a2a import A2AServerFactory
from apcore_a2a.config import ConfigFileError, load_config
from apcore_a2a.settings import SettingsError
from tests.foundation.modules import build_registry

from ._helpers import EXTENSIONS, InProcessCLI, clean_env, error_line, run_cli, write

EMPTY_STRINGS = [
    ("name", ""),
    ("description", "  "),
    ("version", ""),
    ("url", ""),
    ("default_skill", ""),
    ("task_store", ""),
    ("rpc_path", ""),
    ("apcore_config", ""),
    ("auth_issuer", ""),
    ("auth_audience", ""),
    ("auth_key", ""),
    ("push_signing_key", " "),
]
EMPTY_ITEMS = [
    ("allowed_hosts", [""]),
    ("cors_origins", ["https://app.example.com", ""]),
    ("forwarded_allow_ips", [" "]),
    ("api_keys", ["k-0123456789abcdef=ci", ""]),
    ("system_modules", [""]),
    ("auth_algorithms", [""]),
    ("extensions_dirs", [""]),
]


@pytest.mark.parametrize(("name", "value"), EMPTY_STRINGS, ids=[n for n, _ in EMPTY_STRINGS])
def test_an_empty_argument_is_refused_naming_it(name: str, value: str) -> None:
    with pytest.raises(SettingsError) as caught:
        A2AServerFactory(build_registry(), environ={}, **{name: value})
    assert str(caught.value) == f"{name}: must not be empty (leave it out), got {value!r}"


@pytest.mark.parametrize(("name", "value"), EMPTY_ITEMS, ids=[n for n, _ in EMPTY_ITEMS])
def test_an_empty_item_of_a_list_is_refused_naming_it(name: str, value: list[str]) -> None:
    with pytest.raises(SettingsError) as caught:
        A2AServerFactory(build_registry(), environ={}, **{name: value})
    message = str(caught.value)
    assert message == f"{name}: must not hold an empty value", message  # no key shown


def test_an_empty_host_still_means_every_interface() -> None:
    assert A2AServerFactory(build_registry(), environ={}, host="").settings.host == ""


def test_an_empty_environment_variable_still_counts_as_unset() -> None:
    settings = A2AServerFactory(build_registry(), environ={"A2A_NAME": "", "A2A_URL": ""}).settings
    assert (settings.name, settings.url) == (None, None)


def test_an_empty_item_in_the_config_file_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "http:\n  forwarded_allow_ips: ['10.0.0.1', '']\n")
    with pytest.raises(ConfigFileError) as caught:
        load_config(path)
    message = str(caught.value)
    assert message == f"{path}:2: http.forwarded_allow_ips: must not hold an empty value"


@pytest.mark.parametrize(
    ("flag", "line"),
    [
        ("--name", "Error: --name: must not be empty (leave it out), got ''"),
        ("--url", "Error: --url: must not be empty (leave it out), got ''"),
        ("--allowed-host", "Error: --allowed-host: must not hold an empty value"),
    ],
)
def test_serve_refuses_an_empty_flag_in_one_line(flag: str, line: str, taken_port: str) -> None:
    args: list[Any] = ["serve", "--extensions-dir", str(EXTENSIONS), "--port", taken_port]
    result = run_cli(*args, flag, "", env=clean_env())
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert error_line(result) == line


def test_an_empty_config_flag_is_refused_not_replaced_by_the_variable(tmp_path: Path) -> None:
    # `--config ""` read as "not given" showed A2A_CONFIG's file instead.
    other = write(tmp_path, "agent:\n  name: from-the-variable\n")
    env = clean_env(A2A_CONFIG=str(other))
    for command in (["config", "show"], ["serve", "--extensions-dir", str(EXTENSIONS)]):
        result = run_cli(*command, "--config", "", env=env)
        assert result.returncode == 1, result.stderr
        assert "from-the-variable" not in result.stdout
        line = error_line(result)
        assert line == "Error: --config: must not be empty (leave it out), got ''", line


BLANK_VARIABLES = [
    ("A2A_NAME", "  "),
    ("A2A_URL", " "),
    ("A2A_TASK_STORE", "\t"),
    ("JWT_KEY", "  "),
    ("A2A_API_KEYS", " "),
    ("APCORE_EXTENSIONS_DIR", " "),
]


@pytest.mark.parametrize(("env", "value"), BLANK_VARIABLES, ids=[e for e, _ in BLANK_VARIABLES])
def test_a_variable_of_only_whitespace_is_refused_naming_it(env: str, value: str) -> None:
    # A2A_NAME="  " put a name of spaces on the card, where --name "  " is refused: blank
    # is empty in every source, and only "" leaves a variable out (docs/configuration.md).
    with pytest.raises(SettingsError) as caught:
        A2AServerFactory(build_registry(), environ={env: value})
    expected = 'must not be only whitespace (set it to "" or unset it for the default)'
    assert str(caught.value) == f"{env}: {expected}, got {value!r}"


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> InProcessCLI:
    return InProcessCLI(monkeypatch, capsys)


BLANK_HOST = 'must not be only whitespace ("" listens on every interface)'


@pytest.mark.parametrize(
    ("given", "env", "where"),
    [({}, {"A2A_HOST": "   "}, "A2A_HOST"), ({"host": "   "}, {}, "host")],
)
def test_a_blank_host_is_refused_as_blank(
    given: dict[str, str], env: dict[str, str], where: str
) -> None:
    # "" is every interface; "   " is no host at all, and was "not a host name" twice over
    with pytest.raises(SettingsError) as caught:
        A2AServerFactory(build_registry(), environ=env, **given)
    assert str(caught.value) == f"{where}: {BLANK_HOST}, got '   '"


#: config show / check print a refusal on one line: its quoted value stays as it was
FAITHFUL = [
    ("A2A_NAME", "   ", 'must not be only whitespace (set it to "" or unset it for the default)'),
    ("A2A_HOST", "  ", BLANK_HOST),
    ("A2A_URL", "http://a  b", "must be an http:// or https:// URL with a host"),
]


@pytest.mark.parametrize(("env", "value", "problem"), FAITHFUL, ids=[e for e, *_ in FAITHFUL])
def test_config_show_quotes_the_value_as_it_was_given(
    cli: InProcessCLI, env: str, value: str, problem: str
) -> None:
    result = cli("config", "show", env={env: value})
    assert result.returncode == 1, result.stdout
    assert result.stderr == f"Error: {env}: {problem}, got {value!r}\n"


def test_config_check_quotes_a_blank_key_as_it_was_given(cli: InProcessCLI, tmp_path: Path) -> None:
    path = write(tmp_path, f'agent:\n  name: "   "\nmodules:\n  extensions_dirs: [{EXTENSIONS}]\n')
    result = cli("config", "check", str(path))
    assert result.returncode == 1, result.stdout
    expected = f"{path}:2: agent.name: must not be empty (leave the key out), got string '   '"
    assert result.stderr == f"Error: {expected}\n"


def test_serve_refuses_a_variable_of_only_whitespace(taken_port: str) -> None:
    args = ["serve", "--extensions-dir", str(EXTENSIONS), "--port", taken_port]
    result = run_cli(*args, env=clean_env(A2A_NAME="  "))
    assert result.returncode == 1, result.stderr
    line = error_line(result)
    assert line.startswith("Error: A2A_NAME: must not be only whitespace"), line


@pytest.mark.parametrize(
    ("store", "env", "line"),
    [
        ("", {}, "error: --task-store: must not be empty (leave it out), got ''"),
        (" ", {}, "error: --task-store: must not be empty (leave it out), got ' '"),
        ("ftp://h/db", {}, "error: --task-store: unsupported task store URL scheme 'ftp'"),
        (None, {"A2A_TASK_STORE": "ftp://h/db"}, "error: A2A_TASK_STORE: unsupported task"),
    ],
    ids=["empty-flag", "blank-flag", "bad-flag", "bad-variable"],
)
def test_db_upgrade_names_the_flag_or_variable_of_a_refused_store(
    store: str | None, env: dict[str, str], line: str
) -> None:
    # `db upgrade --task-store ""` said "task_store:", a name the command does not take.
    args = ["db", "upgrade"] + ([] if store is None else ["--task-store", store])
    result = run_cli(*args, env=clean_env(**env))
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(line), result.stderr


def test_db_upgrade_names_the_file_variable_of_a_refused_store(tmp_path: Path) -> None:
    path = write(tmp_path, "ftp://h/db\n", name="db-url")
    result = run_cli("db", "upgrade", env=clean_env(A2A_TASK_STORE_FILE=str(path)))
    assert result.returncode == 2, result.stderr
    said = "error: A2A_TASK_STORE_FILE: unsupported task store URL scheme 'ftp'"
    assert result.stderr.startswith(said), result.stderr
