"""An auth refusal that lists where to give a key names every form of it: the flag, its
``-file`` form, the variable, its ``_FILE`` form and the config key. It said
``--auth-key (JWT_KEY)``, never ``JWT_KEY_FILE``, the form docs/configuration.md
recommends for secrets."""

from __future__ import annotations

import re
from typing import Any

import pytest

from apcore_a2a import A2AServerFactory
from apcore_a2a.settings import SettingsError
from tests.foundation.modules import build_registry

from ._helpers import EXTENSIONS, clean_env, error_line, run_cli

KEY = ("--auth-key", "--auth-key-file", "JWT_KEY", "JWT_KEY_FILE", "auth.jwt_key")
JWKS = (
    *("--auth-jwks-url", "--auth-jwks-url-file", "JWT_JWKS_URL", "JWT_JWKS_URL_FILE"),
    "auth.jwks_url",
)
API_KEYS = ("--api-key", "--api-key-file", "A2A_API_KEYS", "A2A_API_KEYS_FILE", "auth.api_keys")
SECRET = "k" * 48

CASES = [
    ({"auth_type": "bearer"}, (*KEY, *JWKS)),
    ({"auth_type": "apikey"}, API_KEYS),
    ({"auth_key": SECRET, "auth_jwks_url": "https://idp.example/jwks.json"}, (*KEY, *JWKS)),
    ({"required_roles": ["ops"]}, (*KEY, *JWKS, *API_KEYS)),
]


@pytest.mark.parametrize(("settings", "forms"), CASES, ids=["bearer", "apikey", "both", "roles"])
def test_the_refusal_names_every_form(settings: dict[str, Any], forms: tuple[str, ...]) -> None:
    with pytest.raises(SettingsError) as caught:
        A2AServerFactory(build_registry(), environ={}, **settings)
    message = str(caught.value)
    words = re.findall(r"[-\w.]+", message)
    missing = [form for form in forms if form not in words]
    assert not missing, message
    assert "\n" not in message


def test_serve_names_the_file_variable(taken_port: str) -> None:
    args = ["serve", "--extensions-dir", str(EXTENSIONS), "--port", taken_port]
    result = run_cli(*args, env=clean_env(A2A_AUTH_TYPE="apikey"))
    assert result.returncode == 1, result.stderr
    line = error_line(result)
    assert "A2A_API_KEYS_FILE" in line and "--api-key-file" in line, line
