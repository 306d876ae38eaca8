"""A keys file holds one API key entry per line (``KEY``, ``KEY=ID``, ``KEY=ID:ROLE+ROLE``).
A line ``k1,k2`` was taken for the one key ``k1,k2`` (and ``k1 k2`` for ``k1 k2``): a
caller sending ``k1`` was refused while the operator believed both keys were set. Such a
line is refused, naming the file and the line number and never the key; and since a key
or entry holding a comma or whitespace can be nothing but such a slip, it is refused from
every source (flag, variable, config file, keyword argument) too."""

from __future__ import annotations

from pathlib import Path

import pytest

from apcore_a2a import A2AServerFactory
from apcore_a2a.settings import SettingsError
from tests.foundation.modules import build_registry

from ._helpers import EXTENSIONS, error_line, run_cli, write

ONE_PER_LINE = "holds a comma, or whitespace inside its key; the file takes one entry per line"
FIRST = "k-one-0123456789abcdef=ci"
#: a second line each: two keys on one line, however separated
SLIPS = [
    "k-two-0123456789abcdef,k-three-0123456789abcdef",
    "k-two-0123456789abcdef k-three-0123456789abcdef",
    "k-two-0123456789abcdef\tk-three-0123456789abcdef",
    "k-two-0123456789abcdef=ops, k-three-0123456789abcdef",
]
SECRETS = ("k-one", "k-two", "k-three", "0123456789")


def _assert_no_key(said: str) -> None:
    shown = [secret for secret in SECRETS if secret in said]
    assert not shown, said


@pytest.mark.parametrize("line", SLIPS, ids=["comma", "space", "tab", "comma-space"])
def test_a_line_of_two_keys_is_refused_naming_the_file_and_line(tmp_path: Path, line: str) -> None:
    path = write(tmp_path, f"{FIRST}\n\n{line}\n", name="api-keys")
    with pytest.raises(SettingsError) as caught:
        A2AServerFactory(build_registry(), environ={"A2A_API_KEYS_FILE": str(path)})
    said = str(caught.value)
    assert said == f"A2A_API_KEYS_FILE: {path} line 3: {ONE_PER_LINE}", said
    _assert_no_key(said)


def test_spaced_roles_of_one_entry_per_line_are_still_read(tmp_path: Path) -> None:
    path = write(tmp_path, f"{FIRST}\nk-ops-0123456789abcdef=ops: operator + admin\n")
    environ = {"A2A_API_KEYS_FILE": str(path)}
    A2AServerFactory(build_registry(), environ=environ).create()


def test_serve_names_the_file_flag_and_the_line(tmp_path: Path, taken_port: str) -> None:
    path = write(tmp_path, f"{SLIPS[0]}\n", name="api-keys")
    args = ["serve", "--extensions-dir", str(EXTENSIONS), "--port", taken_port]
    result = run_cli(*args, "--api-key-file", str(path))
    assert result.returncode == 1, result.stderr
    said = error_line(result)
    assert said == f"Error: --api-key-file: {path} line 1: {ONE_PER_LINE}", said
    _assert_no_key(result.stderr)


INSIDE = "an API key entry must not hold a comma, nor its key whitespace (one key per entry)"


@pytest.mark.parametrize(
    ("given", "environ", "where"),
    [
        ({"api_keys": [SLIPS[0]]}, {}, "api_keys"),
        ({"api_keys": [SLIPS[1]]}, {}, "api_keys"),
        ({}, {"A2A_API_KEYS": f"{FIRST},{SLIPS[1]}"}, "A2A_API_KEYS"),
    ],
    ids=["argument-comma", "argument-space", "variable-space"],
)
def test_an_entry_holding_a_comma_or_whitespace_is_refused_from_every_source(
    given: dict[str, object], environ: dict[str, str], where: str
) -> None:
    with pytest.raises(SettingsError) as caught:
        A2AServerFactory(build_registry(), environ=environ, **given)
    said = str(caught.value)
    assert said == f"{where}: {INSIDE}, got a secret (value not shown)", said
    _assert_no_key(said)


def test_the_flag_of_a_key_holding_a_comma_is_named(taken_port: str) -> None:
    args = ["serve", "--extensions-dir", str(EXTENSIONS), "--port", taken_port]
    result = run_cli(*args, "--api-key", SLIPS[0])
    assert result.returncode == 1, result.stderr
    assert error_line(result) == f"Error: --api-key: {INSIDE}, got a secret (value not shown)"
    _assert_no_key(result.stderr)
