"""One typed settings object for the whole agent.

``serve()`` keyword arguments, CLI flags, environment variables and (later) a config
file all land in :class:`Settings`; nothing else in the package reads the environment.
Precedence is *explicit argument > environment variable > default*, applied by
:meth:`Settings.resolve`.

Example::

    settings = Settings.resolve({"port": 9000}, environ={"A2A_HOST": "0.0.0.0"})
    assert settings.port == 9000 and settings.host == "0.0.0.0"
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args, get_origin

__all__ = ["ENV_VARS", "Settings", "SettingsError"]

LogFormat = Literal["text", "json"]
AuthType = Literal["bearer", "apikey"]


class SettingsError(ValueError):
    """A setting has a value that cannot be used (bad type, unknown choice)."""


def _env(name: str, help: str = "") -> dict[str, str]:
    return {"env": name, "help": help}


@dataclass(frozen=True, slots=True)
class Settings:
    """Every configurable knob of an apcore-a2a agent, with its default."""

    # -- agent identity --------------------------------------------------------------
    name: str | None = field(default=None, metadata=_env("A2A_NAME", "agent name on the card"))
    description: str | None = field(default=None, metadata=_env("A2A_DESCRIPTION"))
    version: str | None = field(default=None, metadata=_env("A2A_VERSION"))
    url: str | None = field(
        default=None, metadata=_env("A2A_URL", "public base URL (default http://HOST:PORT)")
    )
    # -- module sources --------------------------------------------------------------
    extensions_dir: str | None = field(default=None, metadata=_env("APCORE_EXTENSIONS_DIR"))
    bindings_dir: str | None = field(default=None, metadata=_env("APCORE_BINDINGS_DIR"))
    default_skill: str | None = field(default=None, metadata=_env("A2A_DEFAULT_SKILL"))
    # -- HTTP server -----------------------------------------------------------------
    host: str = field(default="127.0.0.1", metadata=_env("A2A_HOST"))
    port: int = field(default=8000, metadata=_env("A2A_PORT"))
    rpc_path: str = field(default="/", metadata=_env("A2A_RPC_PATH"))
    log_level: str = field(default="info", metadata=_env("A2A_LOG_LEVEL"))
    log_format: LogFormat = field(default="text", metadata=_env("A2A_LOG_FORMAT"))
    max_body_bytes: int = field(default=10 * 1024 * 1024, metadata=_env("A2A_MAX_BODY_BYTES"))
    shutdown_timeout: float = field(default=30.0, metadata=_env("A2A_SHUTDOWN_TIMEOUT"))
    cors_origins: tuple[str, ...] = field(default=(), metadata=_env("A2A_CORS_ORIGINS"))
    # -- execution -------------------------------------------------------------------
    execution_timeout: float = field(default=300.0, metadata=_env("A2A_EXECUTION_TIMEOUT"))
    max_streams: int = field(default=50, metadata=_env("A2A_MAX_STREAMS"))
    cancel_on_disconnect: bool = field(default=False, metadata=_env("A2A_CANCEL_ON_DISCONNECT"))
    sync_workers: int = field(default=32, metadata=_env("A2A_SYNC_WORKERS"))
    # -- storage ---------------------------------------------------------------------
    task_store: str = field(default="memory://", metadata=_env("A2A_TASK_STORE"))
    task_max_capacity: int = field(default=10_000, metadata=_env("A2A_TASK_MAX_CAPACITY"))
    task_ttl_seconds: float = field(default=3600.0, metadata=_env("A2A_TASK_TTL_SECONDS"))
    task_retention_seconds: float | None = field(
        default=None, metadata=_env("A2A_TASK_RETENTION_SECONDS")
    )
    cluster: bool = field(default=False, metadata=_env("A2A_CLUSTER"))
    cluster_poll_interval: float = field(default=0.5, metadata=_env("A2A_CLUSTER_POLL_INTERVAL"))
    # -- auth ------------------------------------------------------------------------
    auth_type: AuthType | None = field(default=None, metadata=_env("A2A_AUTH_TYPE"))
    auth_key: str | None = field(default=None, metadata=_env("JWT_KEY"))
    auth_jwks_url: str | None = field(default=None, metadata=_env("JWT_JWKS_URL"))
    auth_issuer: str | None = field(default=None, metadata=_env("JWT_ISSUER"))
    auth_audience: str | None = field(default=None, metadata=_env("JWT_AUDIENCE"))
    auth_algorithms: tuple[str, ...] = field(default=(), metadata=_env("JWT_ALGORITHMS"))
    api_keys: tuple[str, ...] = field(default=(), metadata=_env("A2A_API_KEYS"))
    require_auth: bool = field(default=True, metadata=_env("A2A_REQUIRE_AUTH"))
    # -- push notifications ----------------------------------------------------------
    push_notifications: bool = field(default=False, metadata=_env("PUSH_NOTIFICATIONS"))
    push_allow_insecure_urls: bool = field(
        default=False, metadata=_env("A2A_PUSH_ALLOW_INSECURE_URLS")
    )
    push_timeout: float = field(default=10.0, metadata=_env("A2A_PUSH_TIMEOUT"))
    push_retry_delays: tuple[float, ...] = field(
        default=(1.0, 2.0, 4.0), metadata=_env("A2A_PUSH_RETRY_DELAYS")
    )
    push_signing_key: str | None = field(default=None, metadata=_env("A2A_PUSH_SIGNING_KEY"))
    push_encryption_key: str | None = field(default=None, metadata=_env("A2A_PUSH_ENCRYPTION_KEY"))
    # -- gRPC ------------------------------------------------------------------------
    grpc_port: int | None = field(default=None, metadata=_env("A2A_GRPC_PORT"))
    grpc_tls_cert: str | None = field(default=None, metadata=_env("A2A_GRPC_TLS_CERT"))
    grpc_tls_key: str | None = field(default=None, metadata=_env("A2A_GRPC_TLS_KEY"))
    grpc_reflection: bool = field(default=False, metadata=_env("A2A_GRPC_REFLECTION"))
    # -- operations ------------------------------------------------------------------
    explorer: bool = field(default=False, metadata=_env("A2A_EXPLORER"))
    explorer_prefix: str = field(default="/explorer", metadata=_env("A2A_EXPLORER_PREFIX"))
    metrics: bool = field(default=False, metadata=_env("A2A_METRICS"))
    telemetry: bool = field(default=False, metadata=_env("A2A_TELEMETRY"))
    sdk_telemetry: bool = field(default=False, metadata=_env("A2A_SDK_TELEMETRY"))

    # ---------------------------------------------------------------------------------
    @classmethod
    def resolve(
        cls,
        overrides: Mapping[str, Any] | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        base: Settings | None = None,
    ) -> Settings:
        """Build settings from *base* (defaults), then the environment, then *overrides*.

        ``None`` values in *overrides* mean "not given" and do not override anything.
        Unknown keys raise :class:`SettingsError`.
        """
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            raw = environ.get(f.metadata["env"])
            if raw is not None and raw != "":
                values[f.name] = _coerce(f, raw, source=f.metadata["env"])
        for key, value in (overrides or {}).items():
            if key not in _FIELDS:
                raise SettingsError(f"unknown setting {key!r}")
            if value is not None:
                values[key] = _coerce(_FIELDS[key], value, source=key)
        start = base if base is not None else cls()
        return dataclasses.replace(start, **values)

    def public_url(self) -> str:
        """The base URL advertised on the card."""
        if self.url:
            return self.url.rstrip("/")
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    def masked(self) -> dict[str, Any]:
        """The settings as a dict with secrets replaced by ``"***"``."""
        out = dataclasses.asdict(self)
        for key in _SECRETS:
            if out.get(key):
                out[key] = "***" if isinstance(out[key], str) else ["***"] * len(out[key])
        return out


_FIELDS = {f.name: f for f in dataclasses.fields(Settings)}
_SECRETS = ("auth_key", "api_keys", "push_signing_key", "push_encryption_key")

#: Environment variable name -> setting name, for documentation and the CLI help.
ENV_VARS: dict[str, str] = {f.metadata["env"]: f.name for f in dataclasses.fields(Settings)}

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _base_type(annotation: Any) -> tuple[Any, bool]:
    """Return (type, optional) for the string annotations used above."""
    text = str(annotation)
    optional = text.endswith("| None")
    core = text.removesuffix(" | None")
    mapping: dict[str, Any] = {
        "str": str,
        "int": int,
        "float": float,
        "bool": bool,
        "tuple[str, ...]": (tuple, str),
        "tuple[float, ...]": (tuple, float),
        "LogFormat": LogFormat,
        "AuthType": AuthType,
    }
    return mapping[core], optional


def _coerce(f: dataclasses.Field[Any], value: Any, *, source: str) -> Any:
    kind, optional = _base_type(f.type)
    try:
        if value is None and optional:
            return None
        if kind is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in _TRUE:
                return True
            if text in _FALSE:
                return False
            raise ValueError(f"expected a boolean, got {value!r}")
        if kind is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError(f"expected an integer, got {value!r}")
            return int(value)
        if kind is float:
            if isinstance(value, bool):
                raise ValueError(f"expected a number, got {value!r}")
            return float(value)
        if kind is str:
            if not isinstance(value, str):
                raise ValueError(f"expected a string, got {type(value).__name__}")
            return value
        if isinstance(kind, tuple):
            item = kind[1]
            items = value.split(",") if isinstance(value, str) else list(value)
            return tuple(item(x.strip() if isinstance(x, str) else x) for x in items if x != "")
        if get_origin(kind) is Literal:
            choices = get_args(kind)
            if value not in choices:
                raise ValueError(f"expected one of {', '.join(map(str, choices))}, got {value!r}")
            return value
    except (TypeError, ValueError) as exc:
        raise SettingsError(f"{source}: {exc}") from None
    raise SettingsError(f"{source}: unsupported setting type {f.type}")  # pragma: no cover
