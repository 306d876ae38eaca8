"""A list setting given as nothing but separators is refused at start, naming where it was
given. ``A2A_API_KEYS=","`` used to mean "no key": the agent served without
authentication while the operator believed keys were set; ``APCORE_EXTENSIONS_DIR=":"``
named no folder. An item of only separators (a file line ``,``, ``--api-key ,``, a YAML
``[","]``) is refused the same way. A variable set to exactly "" still counts as unset
(docs/configuration.md, *Precedence*)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import get_origin

import pytest

from apcore_a2a import A2AServerFactory
from apcore_a2a.settings import Setting, Settings, SettingsError
from tests.foundation.modules import build_registry

from ._helpers import EXTENSIONS, clean_env, error_line, run_cli, write

LISTS = [spec for spec in Settings.specs() if get_origin(spec.annotation) is tuple]
SECRET = "got a secret (value not shown)"


def _separator(spec: Setting) -> str:
    return os.pathsep if "os.pathsep-separated" in spec.help else ","


def _only_separators(spec: Setting, value: str) -> str:
    sep = _separator(spec)
    got = SECRET if spec.secret else f"got {value!r}"
    return f"holds only separators ({sep!r}), no item (for none, leave it out), {got}"


def test_every_list_setting_is_covered() -> None:
    names = {spec.name for spec in LISTS}
    assert {"api_keys", "extensions_dirs", "bindings_dirs", "push_retry_delays"} <= names


@pytest.mark.parametrize("spec", LISTS, ids=[spec.env for spec in LISTS])
@pytest.mark.parametrize("shape", ["one", "spaced", "many"])
def test_a_list_variable_of_only_separators_is_refused_naming_it(spec: Setting, shape: str) -> None:
    sep = _separator(spec)
    value = {"one": sep, "spaced": f" {sep} ", "many": sep * 3}[shape]
    with pytest.raises(SettingsError) as caught:
        A2AServerFactory(build_registry(), environ={spec.env: value})
    assert str(caught.value) == f"{spec.env}: {_only_separators(spec, value)}"


def test_separators_between_items_are_still_skipped() -> None:
    environ = {"A2A_API_KEYS": ",k-0123456789abcdef=ci,,", "A2A_CORS_ORIGINS": ""}
    settings = A2AServerFactory(build_registry(), environ=environ).settings
    assert settings.api_keys == ("k-0123456789abcdef=ci",)
    assert settings.cors_origins == ()  # "" is unset


@pytest.mark.parametrize("value", [",", " , ", ",,"])
def test_a_keyword_argument_of_only_separators_is_refused(value: str) -> None:
    with pytest.raises(SettingsError) as caught:
        A2AServerFactory(build_registry(), environ={}, api_keys=value)
    spec = next(spec for spec in LISTS if spec.name == "api_keys")
    assert str(caught.value) == f"api_keys: {_only_separators(spec, value)}"


@pytest.mark.parametrize(
    "text",
    [",\n", ",\n\n , \n", "k-0123456789abcdef=ci\n,\n"],
    ids=["comma", "comma-lines", "key-and-comma"],
)
def test_a_key_file_line_of_only_separators_is_refused_naming_the_variable(
    tmp_path: Path, text: str
) -> None:
    path = write(tmp_path, text, name="api-keys")
    with pytest.raises(SettingsError) as caught:
        A2AServerFactory(build_registry(), environ={"A2A_API_KEYS_FILE": str(path)})
    said = "A2A_API_KEYS_FILE: must not hold an item of only separators (',')"
    assert str(caught.value) == f"{said}, {SECRET}"


@pytest.mark.parametrize(
    ("name", "value", "sep"),
    [
        ("api_keys", [","], ","),
        ("required_roles", ["ops", " ,, "], ","),
        ("extensions_dirs", [os.pathsep], os.pathsep),
    ],
)
def test_a_list_item_of_only_separators_is_refused(name: str, value: list[str], sep: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.resolve({name: value}, environ={})
    assert str(caught.value).startswith(
        f"{name}: must not hold an item of only separators ({sep!r})"
    )


SERVE_CASES = [
    ({"A2A_API_KEYS": " , "}, [], "A2A_API_KEYS: holds only separators (',')"),
    ({"APCORE_EXTENSIONS_DIR": os.pathsep}, [], "APCORE_EXTENSIONS_DIR: holds only separators"),
    ({}, ["--api-key", ","], "--api-key: must not hold an item of only separators (',')"),
    ({}, ["--api-key-file", "KEYS"], "--api-key-file: must not hold an item of only separators"),
    ({"A2A_API_KEYS_FILE": "KEYS"}, [], "A2A_API_KEYS_FILE: must not hold an item of only"),
]


@pytest.mark.parametrize(("env", "args", "start"), SERVE_CASES)
def test_serve_refuses_a_list_of_only_separators_in_one_line(
    tmp_path: Path, taken_port: str, env: dict[str, str], args: list[str], start: str
) -> None:
    keys = str(write(tmp_path, ",\n\n,\n", name="api-keys"))
    env = {k: keys if v == "KEYS" else v for k, v in env.items()}
    args = [keys if a == "KEYS" else a for a in args]
    folders = [] if "APCORE_EXTENSIONS_DIR" in env else ["--extensions-dir", str(EXTENSIONS)]
    result = run_cli("serve", *folders, "--port", taken_port, *args, env=clean_env(**env))
    assert result.returncode == 1, result.stderr
    line = error_line(result)
    assert line.startswith(f"Error: {start}"), line
    assert "Traceback" not in result.stderr


def test_config_check_refuses_a_yaml_list_of_only_separators(tmp_path: Path) -> None:
    path = write(tmp_path, "auth:\n  api_keys: [',', ' , ']\n")
    result = run_cli("config", "check", str(path), env=clean_env())
    assert result.returncode == 1, result.stderr
    line = error_line(result)
    said = "Error: auth.api_keys: must not hold an item of only separators (',')"
    assert line == f"{said}, {SECRET}", line
