"""An HMAC secret shorter than its algorithm's hash is refused at start (RFC 7518 3.2: "a
key of the same size as the hash output ... or larger MUST be used"): by the
programmatic ``JWTAuthenticator`` with :class:`WeakKeyError`, by ``serve()`` and the
factory with one line naming where the secret came from, by the CLI with exit status 1.
It used to be a warning, and the agent then served tokens anyone could brute-force."""

from __future__ import annotations

from pathlib import Path

import pytest

from apcore_a2a import A2AServerFactory
from apcore_a2a.auth import JWTAuthenticator, WeakKeyError
from apcore_a2a.settings import SettingsError
from tests.config._helpers import EXTENSIONS, clean_env, error_line, run_cli, write
from tests.foundation.modules import build_registry

# (secret length in bytes, allowed algorithms, the algorithm named as needing more)
TOO_SHORT = [
    (5, None, "HS256 needs at least 32"),
    (31, ["HS256"], "HS256 needs at least 32"),
    (32, ["HS256", "HS384"], "HS384 needs at least 48"),
    (47, ["HS384"], "HS384 needs at least 48"),
    (48, ["HS512"], "HS512 needs at least 64"),
    (63, ["HS256", "HS512"], "HS512 needs at least 64"),
]
LONG_ENOUGH = [(32, None), (32, ["HS256"]), (48, ["HS384", "HS256"]), (64, ["HS512"])]


@pytest.mark.parametrize(("size", "algorithms", "words"), TOO_SHORT)
def test_a_short_secret_is_refused(size: int, algorithms: list[str] | None, words: str) -> None:
    secret = "k" * size
    with pytest.raises(WeakKeyError) as caught:
        JWTAuthenticator(secret, algorithms=algorithms)
    message = str(caught.value)
    assert words in message and f"is {size} bytes" in message, message
    assert secret not in message  # a secret is never shown, not even a weak one
    assert isinstance(caught.value, ValueError)  # what configuration errors are


@pytest.mark.parametrize(("size", "algorithms"), LONG_ENOUGH)
def test_a_secret_of_the_hash_size_is_kept(size: int, algorithms: list[str] | None) -> None:
    auth = JWTAuthenticator("k" * size, algorithms=algorithms)
    assert auth.algorithms == (algorithms or ["HS256"])


def test_bytes_are_counted_not_characters() -> None:
    # 16 two-byte characters: 32 bytes of secret, what HMAC is given.
    assert JWTAuthenticator("é" * 16).algorithms == ["HS256"]
    with pytest.raises(WeakKeyError, match="is 30 bytes"):
        JWTAuthenticator("é" * 15)


def test_the_factory_names_the_keyword_argument() -> None:
    with pytest.raises(SettingsError) as caught:
        A2AServerFactory(build_registry(), environ={}, auth_key="short-secret")
    message = str(caught.value)
    assert message.startswith("auth_key: JWT HMAC secret is 12 bytes;"), message
    assert "short-secret" not in message


def test_the_factory_names_the_variable_with_the_algorithm_that_needs_more() -> None:
    environ = {"JWT_KEY": "k" * 40, "JWT_ALGORITHMS": "HS256,HS512"}
    with pytest.raises(SettingsError) as caught:
        A2AServerFactory(build_registry(), environ=environ)
    message = str(caught.value)
    assert message.startswith("JWT_KEY: JWT HMAC secret is 40 bytes; HS512 needs"), message


def test_the_factory_names_the_config_file_key(tmp_path: Path) -> None:
    path = write(tmp_path, "auth:\n  jwt_key: short-secret\n")
    with pytest.raises(SettingsError, match=r"^auth\.jwt_key: JWT HMAC secret is 12 bytes"):
        A2AServerFactory(build_registry(), config=path, environ={})


def test_the_cli_says_one_line_naming_the_flag_and_exits_1(taken_port: str) -> None:
    result = run_cli(
        "serve",
        "--extensions-dir",
        str(EXTENSIONS),
        "--auth-key",
        "short-secret",
        "--port",
        taken_port,
    )
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    line = error_line(result)
    assert line.startswith("Error: --auth-key: JWT HMAC secret is 12 bytes;"), line
    assert "RFC 7518" in line and "short-secret" not in line


def test_the_cli_names_the_secret_file_variable(tmp_path: Path, taken_port: str) -> None:
    secret = tmp_path / "jwt"
    secret.write_text("short-secret\n")
    env = clean_env(JWT_KEY_FILE=str(secret))
    result = run_cli("serve", "--extensions-dir", str(EXTENSIONS), "--port", taken_port, env=env)
    assert result.returncode == 1, result.stderr
    line = error_line(result)
    assert line.startswith("Error: JWT_KEY_FILE: JWT HMAC secret is 12 bytes;"), line
