"""authenticator_from_settings / security_middleware: what each configuration builds."""

from __future__ import annotations

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
from apcore_a2a.settings import Settings, SettingsError

from .keys import HMAC_SECRET, rsa_pair


def settings(**values: object) -> Settings:
    return Settings.resolve(values, environ={})


def test_no_auth_configured() -> None:
    assert authenticator_from_settings(settings()) is None
    assert security_middleware(settings(), None) == []


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
        ({"auth_type": "bearer"}, "--auth-type bearer requires --auth-key"),
        ({"auth_type": "apikey"}, "--auth-type apikey requires at least one --api-key"),
        ({"auth_key": HMAC_SECRET, "auth_jwks_url": "http://x/j"}, "not both"),
        ({"auth_key": HMAC_SECRET, "auth_algorithms": "RS256"}, "RS256 cannot be used"),
        ({"auth_key": HMAC_SECRET, "auth_algorithms": "none"}, "'none'"),
        ({"auth_jwks_url": "ftp://idp/jwks"}, "scheme"),
        ({"api_keys": ("=bob",)}, "KEY=IDENTITY_ID"),
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
    assert mw.kwargs["exempt_get_prefixes"] == ["/ui"]
    assert mw.kwargs["rpc_path"] == "/a2a"
    no_explorer = security_middleware(settings(auth_key=HMAC_SECRET), auth)
    assert [m.cls for m in no_explorer] == [AuthMiddleware]
    assert no_explorer[0].kwargs["exempt_get_prefixes"] == []
