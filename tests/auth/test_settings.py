"""authenticator_from_settings / security_middleware: what each configuration builds."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.middleware.cors import CORSMiddleware

from apcore_a2a.auth import (
    AnyAuthenticator,
    APIKeyAuthenticator,
    AuthMiddleware,
    JWTAuthenticator,
    authenticator_from_settings,
    security_middleware,
)
from apcore_a2a.config import load_config
from apcore_a2a.settings import Settings, SettingsError

from .keys import HMAC_SECRET, rsa_pair


def settings(**values: object) -> Settings:
    return Settings.resolve(values, environ={})


def test_no_auth_configured() -> None:
    assert authenticator_from_settings(settings()) is None
    assert security_middleware(settings(), None) == (None, None)


def test_bearer_from_key_with_issuer_audience_and_algorithms() -> None:
    auth = authenticator_from_settings(
        settings(
            auth_type="bearer",
            auth_key=HMAC_SECRET,
            auth_issuer="https://idp/",
            auth_audience="agent",
            auth_algorithms="HS256,HS512",
        )
    )
    assert isinstance(auth, JWTAuthenticator)
    assert (auth.issuer, auth.audience, auth.algorithms) == (
        "https://idp/",
        "agent",
        ["HS256", "HS512"],
    )


def test_env_vars_feed_the_authenticator() -> None:
    s = Settings.resolve(
        environ={
            "JWT_KEY": rsa_pair().public_pem,
            "JWT_ISSUER": "iss",
            "JWT_AUDIENCE": "aud",
            "A2A_AUTH_TYPE": "bearer",
        }
    )
    auth = authenticator_from_settings(s)
    assert isinstance(auth, JWTAuthenticator)
    assert (auth.algorithms, auth.issuer, auth.audience) == (["RS256"], "iss", "aud")


def test_key_without_auth_type_turns_bearer_on() -> None:
    assert isinstance(authenticator_from_settings(settings(auth_key=HMAC_SECRET)), JWTAuthenticator)


def test_jwks_url() -> None:
    auth = authenticator_from_settings(
        settings(auth_type="bearer", auth_jwks_url="http://127.0.0.1:1/jwks.json")
    )
    assert isinstance(auth, JWTAuthenticator)
    assert auth.algorithms == ["RS256", "ES256"]


def test_api_keys_and_both() -> None:
    keys = ("k-0123456789abcdef=alice",)
    assert isinstance(
        authenticator_from_settings(settings(auth_type="apikey", api_keys=keys)),
        APIKeyAuthenticator,
    )
    assert isinstance(authenticator_from_settings(settings(api_keys=keys)), APIKeyAuthenticator)
    both = authenticator_from_settings(
        settings(auth_type="bearer", auth_key=HMAC_SECRET, api_keys=keys)
    )
    assert isinstance(both, AnyAuthenticator)
    assert set(both.security_schemes()) == {"bearer", "apiKey"}
    # An explicit apikey type ignores a stray JWT key rather than accepting JWTs too.
    only_keys = authenticator_from_settings(
        settings(auth_type="apikey", auth_key=HMAC_SECRET, api_keys=keys)
    )
    assert isinstance(only_keys, APIKeyAuthenticator)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        # called alone, the refusal names the setting (the factory names its source)
        ({"auth_type": "bearer"}, "auth_type: requires --auth-key"),
        ({"auth_type": "apikey"}, "auth_type: requires at least one --api-key"),
        ({"auth_key": HMAC_SECRET, "auth_jwks_url": "http://x/j"}, "not both"),
        ({"auth_key": HMAC_SECRET, "auth_algorithms": "RS256"}, "RS256 cannot be used"),
        ({"auth_key": HMAC_SECRET, "auth_algorithms": "none"}, "'none'"),
        ({"auth_jwks_url": "ftp://idp/jwks"}, "scheme"),
        ({"api_keys": ("=bob",)}, "KEY=IDENTITY_ID"),
        # the later entry silently replaced the earlier: the key became someone else
        ({"api_keys": ("k-0123456789abcdef=bob", " k-0123456789abcdef=eve:admin")}, "twice"),
        ({"required_roles": ("admin",)}, "required_roles: requires authentication"),
        ({"required_scopes": "a2a:call"}, "required_scopes: requires authentication"),
    ],
)
def test_unusable_settings_raise_settings_error(values: dict[str, object], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        authenticator_from_settings(settings(**values))


def test_security_middleware_order_and_options() -> None:
    s = settings(
        auth_type="apikey",
        api_keys=("k-0123456789abcdef",),
        require_auth=False,
        cors_origins="https://app.example",
        explorer=True,
        explorer_prefix="/ui",
        rpc_path="/a2a",
    )
    auth = authenticator_from_settings(s)
    cors, mw = security_middleware(s, auth)
    assert cors.cls is CORSMiddleware
    assert "X-API-Key" in cors.kwargs["allow_headers"]
    assert mw.cls is AuthMiddleware
    assert mw.kwargs["require_auth"] is False
    assert mw.kwargs["ops_public"] is False
    # Which paths are public is the request record's business (see test_middleware.py).
    no_cors = security_middleware(settings(auth_key=HMAC_SECRET), auth)
    assert no_cors[0] is None and no_cors[1].cls is AuthMiddleware


def test_jwt_exp_and_jwks_knobs_from_the_environment() -> None:
    environ = {
        "JWT_JWKS_URL": "https://idp.example/jwks.json",
        "JWT_REQUIRE_EXP": "false",
        "JWT_JWKS_CACHE_SECONDS": "120",
        "JWT_JWKS_REFRESH_COOLDOWN": "5",
        "JWT_JWKS_TIMEOUT": "2.5",
        "JWT_JWKS_UNKNOWN_KID_SECONDS": "90",
        "JWT_JWKS_BACKOFF_MAX": "15",
    }
    auth = authenticator_from_settings(Settings.resolve({}, environ=environ))
    assert isinstance(auth, JWTAuthenticator)
    assert "exp" not in auth.require_claims
    keys = auth.jwks
    assert keys is not None
    assert (keys.cache_seconds, keys.refresh_cooldown, keys.timeout) == (120, 5, 2.5)
    assert (keys.unknown_kid_seconds, keys.backoff_max) == (90, 15)
    strict = authenticator_from_settings(settings(auth_key=HMAC_SECRET))
    assert isinstance(strict, JWTAuthenticator) and "exp" in strict.require_claims


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"auth_jwks_timeout": 0}, "auth_jwks_timeout"),
        ({"auth_jwks_backoff_max": -1}, "auth_jwks_backoff_max"),
    ],
)
def test_unusable_jwks_knobs(values: dict[str, object], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        settings(auth_jwks_url="https://idp/jwks", **values)


def test_required_roles_and_scopes_from_flags_env_and_file(tmp_path: Path) -> None:
    from apcore_a2a.cli import build_parser
    from apcore_a2a.cli.serve import overrides_from

    args = build_parser().parse_args(
        ["serve", "--required-roles", "analyst", "--required-roles", "admin", "--no-streaming"]
    )
    assert overrides_from(args) == {
        "required_roles": ["analyst", "admin"],
        "streaming": False,
    }
    env = {"A2A_REQUIRED_ROLES": "analyst, admin", "A2A_REQUIRED_SCOPES": "a2a:call"}
    s = Settings.resolve(environ={**env, "A2A_STREAMING": "false"})
    assert (s.required_roles, s.required_scopes, s.streaming) == (
        ("analyst", "admin"),
        ("a2a:call",),
        False,
    )
    path = tmp_path / "agent.yaml"
    path.write_text(
        "agent: {streaming: false}\nauth: {required_roles: [analyst], required_scopes: [x, y]}\n"
    )
    s = load_config(path).base()
    assert (s.required_roles, s.required_scopes, s.streaming) == (("analyst",), ("x", "y"), False)
