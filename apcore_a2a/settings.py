"""One typed settings object for the whole agent.

Every knob is a field of :class:`Settings` (a ``pydantic-settings`` model) that declares, in
one place, its environment variable, its key in the agent config file and its command-line
flag. ``serve()`` keyword arguments, CLI flags, environment variables and the config file all
land here; nothing else in the package reads the environment. Precedence is *argument or flag
> environment variable > config file > default*, applied by :meth:`Settings.resolve`.

Secrets (``secret=True``) can also come from a file: ``<ENV>_FILE=/run/secrets/x`` or
``--<flag>-file PATH`` (the file's content, without the trailing newline; for lists, one item
per line), so they need not appear in ``ps`` or the environment.

Example::

    settings = Settings.resolve({"port": 9000}, environ={"A2A_HOST": "0.0.0.0"})
    assert settings.port == 9000 and settings.host == "0.0.0.0"
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from apcore_a2a._settings_support import (
    Setting,
    SettingsBase,
    SettingsError,
    advertised_url,
    read_secret_file,
    setting,
)

__all__ = [
    "CONFIG_ENV",
    "ENV_VARS",
    "Setting",
    "Settings",
    "SettingsError",
    "config_path",
    "read_secret_file",
]


def _items(value: Any) -> Any:
    return [v.strip() for v in value.split(",") if v.strip()] if isinstance(value, str) else value


def _paths(value: Any) -> Any:
    return [v for v in value.split(os.pathsep) if v] if isinstance(value, str) else value


def _lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


# From the environment, a list is one string: comma-separated, module folders os.pathsep.
Strings = Annotated[tuple[str, ...], BeforeValidator(_items)]
Numbers = Annotated[tuple[float, ...], BeforeValidator(_items)]
Paths = Annotated[tuple[str, ...], BeforeValidator(_paths)]
LogLevel = Annotated[
    Literal["critical", "error", "warning", "info", "debug"], BeforeValidator(_lower)
]
LogFormat = Literal["text", "json"]
AuthType = Literal["bearer", "apikey"]


#: Environment variable naming the agent config file (``--config`` / ``config=`` win).
CONFIG_ENV = "A2A_CONFIG"


def config_path(environ: Mapping[str, str] | None = None) -> str | None:
    """The config file the environment names, if any."""
    value = (os.environ if environ is None else environ).get(CONFIG_ENV)
    return value or None


class Settings(SettingsBase):
    """Every configurable knob of an apcore-a2a agent, with its default.

    Build it with :meth:`resolve` (or ``Settings()`` for defaults plus ``os.environ``).
    """

    model_config = SettingsConfigDict(frozen=True, extra="forbid", validate_default=False)

    # -- agent identity --------------------------------------------------------------
    name: str | None = setting(None, "A2A_NAME", "agent.name", "agent name on the card")
    description: str | None = setting(
        None, "A2A_DESCRIPTION", "agent.description", "agent description on the card"
    )
    version: str | None = setting(
        None, "A2A_VERSION", "agent.version", "agent version on the card", flag="--agent-version"
    )
    url: str | None = setting(
        None, "A2A_URL", "agent.url", "public base URL (default: the mount or http://HOST:PORT)"
    )
    default_skill: str | None = setting(
        None, "A2A_DEFAULT_SKILL", "agent.default_skill", "skill for messages naming none"
    )
    route_by_schema: bool = setting(
        True, "A2A_ROUTE_BY_SCHEMA", "agent.route_by_schema", "route skill-less messages by schema"
    )
    streaming: bool = setting(True, "A2A_STREAMING", "agent.streaming", "serve streaming calls")
    # -- module sources (used when no registry is given) ------------------------------
    extensions_dirs: Paths = setting(
        (),
        "APCORE_EXTENSIONS_DIR",
        "modules.extensions_dirs",
        "folder of apcore module files to discover (repeatable; env: os.pathsep-separated)",
        flag="--extensions-dir",
    )
    bindings_dirs: Paths = setting(
        (),
        "APCORE_BINDINGS_DIR",
        "modules.bindings_dirs",
        "folder of *.binding.yaml files to load (repeatable; env: os.pathsep-separated)",
        flag="--bindings",
    )
    apcore_config: str | None = setting(
        None, "APCORE_CONFIG_FILE", "modules.apcore_config", "apcore config file (YAML)"
    )
    acl: str | None = setting(None, "A2A_ACL", "modules.acl", "apcore ACL file (YAML)")
    # -- HTTP server -----------------------------------------------------------------
    host: str = setting("127.0.0.1", "A2A_HOST", "http.host", "address to listen on")
    port: int = setting(8000, "A2A_PORT", "http.port", "port to listen on")
    workers: int = setting(
        1,
        "A2A_WORKERS",
        "http.workers",
        "server processes on this host (2+: needs --cluster)",
        ge=1,
    )
    rpc_path: str = setting("/", "A2A_RPC_PATH", "http.rpc_path", "JSON-RPC endpoint path")
    cors_origins: Strings = setting(
        (),
        "A2A_CORS_ORIGINS",
        "http.cors_origins",
        "browser origin allowed to call the agent (repeatable; env: comma-separated)",
        flag="--cors-origin",
    )
    allowed_hosts: Strings = setting(
        (),
        "A2A_ALLOWED_HOSTS",
        "http.allowed_hosts",
        "Host headers to answer; others get 400 (default: the url's host, a specific bind "
        "host and the loopback names; '*' = any) (repeatable; env: comma-separated)",
        flag="--allowed-host",
    )
    log_level: LogLevel = setting("info", "A2A_LOG_LEVEL", "logging.level", "log level")
    log_format: LogFormat = setting("text", "A2A_LOG_FORMAT", "logging.format", "text or json")
    # -- limits ----------------------------------------------------------------------
    max_body_bytes: int = setting(
        10 * 1024 * 1024, "A2A_MAX_BODY_BYTES", "limits.max_body_bytes", "largest body", ge=1
    )
    max_json_depth: int = setting(
        32, "A2A_MAX_JSON_DEPTH", "limits.max_json_depth", "deepest nesting of a JSON body", ge=1
    )
    max_json_values: int = setting(
        10_000, "A2A_MAX_JSON_VALUES", "limits.max_json_values", "JSON values in a body", ge=1
    )
    max_parts_per_message: int = setting(
        100, "A2A_MAX_PARTS_PER_MESSAGE", "limits.max_parts_per_message", "parts in a message", ge=1
    )
    shutdown_timeout: float = setting(
        30.0, "A2A_SHUTDOWN_TIMEOUT", "limits.shutdown_timeout", "seconds to drain on stop", ge=0
    )
    execution_timeout: float = setting(
        300.0, "A2A_EXECUTION_TIMEOUT", "limits.execution_timeout", "seconds a run may take", gt=0
    )
    max_streams: int = setting(
        50, "A2A_MAX_STREAMS", "limits.max_streams", "concurrent SSE/gRPC streams", ge=0
    )
    max_streams_per_caller: int = setting(
        20,
        "A2A_MAX_STREAMS_PER_CALLER",
        "limits.max_streams_per_caller",
        "concurrent streams one caller may hold (0 = no per-caller quota)",
        ge=0,
    )
    max_unfinished_tasks_per_caller: int = setting(
        1000,
        "A2A_MAX_UNFINISHED_TASKS_PER_CALLER",
        "limits.max_unfinished_tasks_per_caller",
        "unfinished tasks (running or waiting for input) one caller may hold (0 = no quota)",
        ge=0,
    )
    cancel_on_disconnect: bool = setting(
        False,
        "A2A_CANCEL_ON_DISCONNECT",
        "limits.cancel_on_disconnect",
        "cancel a task when its only stream is dropped",
    )
    sync_workers: int = setting(
        32, "A2A_SYNC_WORKERS", "limits.sync_workers", "threads for sync modules", ge=1
    )
    # -- storage ---------------------------------------------------------------------
    task_store: str = setting(
        "memory://",
        "A2A_TASK_STORE",
        "storage.task_store",
        "memory://, sqlite:///path.db or postgresql://...",
    )
    task_max_capacity: int = setting(
        10_000, "A2A_TASK_MAX_CAPACITY", "storage.task_max_capacity", "tasks kept in memory", ge=1
    )
    task_ttl_seconds: float = setting(
        3600.0,
        "A2A_TASK_TTL_SECONDS",
        "storage.task_ttl_seconds",
        "memory: finished task TTL",
        ge=0,
    )
    task_event_log_size: int = setting(
        100, "A2A_TASK_EVENT_LOG_SIZE", "storage.task_event_log_size", "events per task", ge=0
    )
    task_retention_seconds: float | None = setting(
        None,
        "A2A_TASK_RETENTION_SECONDS",
        "storage.task_retention_seconds",
        "SQL: delete finished tasks older than this",
        ge=0,
    )
    cluster: bool = setting(
        False, "A2A_CLUSTER", "storage.cluster", "share tasks and streams with other replicas"
    )
    cluster_poll_interval: float = setting(
        0.5,
        "A2A_CLUSTER_POLL_INTERVAL",
        "storage.cluster_poll_interval",
        "seconds between event-table polls",
        gt=0,
    )
    cluster_wakeups: bool = setting(
        True, "A2A_CLUSTER_WAKEUPS", "storage.cluster_wakeups", "wake streams at once on new events"
    )
    cluster_heartbeat_interval: float = setting(
        2.0,
        "A2A_CLUSTER_HEARTBEAT_INTERVAL",
        "storage.cluster_heartbeat_interval",
        "seconds between a replica's heartbeats",
        gt=0,
    )
    cluster_replica_timeout: float = setting(
        10.0,
        "A2A_CLUSTER_REPLICA_TIMEOUT",
        "storage.cluster_replica_timeout",
        "seconds without a heartbeat before a replica counts as dead",
        gt=0,
    )
    # -- auth ------------------------------------------------------------------------
    auth_type: AuthType | None = setting(None, "A2A_AUTH_TYPE", "auth.type", "bearer or apikey")
    auth_key: str | None = setting(
        None, "JWT_KEY", "auth.jwt_key", "JWT secret or public key (PEM)", secret=True
    )
    auth_jwks_url: str | None = setting(
        None, "JWT_JWKS_URL", "auth.jwks_url", "JWKS URL of the token issuer"
    )
    auth_issuer: str | None = setting(None, "JWT_ISSUER", "auth.issuer", "required JWT iss")
    auth_audience: str | None = setting(None, "JWT_AUDIENCE", "auth.audience", "required JWT aud")
    auth_algorithms: Strings = setting(
        (),
        "JWT_ALGORITHMS",
        "auth.algorithms",
        "accepted JWT algorithms (repeatable; env: comma-separated)",
        flag="--auth-algorithm",
    )
    api_keys: Strings = setting(
        (),
        "A2A_API_KEYS",
        "auth.api_keys",
        "accepted API key, KEY or KEY=ID (repeatable; env: comma-separated)",
        flag="--api-key",
        secret=True,
    )
    require_auth: bool = setting(
        True, "A2A_REQUIRE_AUTH", "auth.require", "refuse calls without credentials"
    )
    auth_require_exp: bool = setting(
        True, "JWT_REQUIRE_EXP", "auth.require_exp", "refuse JWTs without an exp claim"
    )
    required_roles: Strings = setting((), "A2A_REQUIRED_ROLES", "auth.required_roles", "any of")
    required_scopes: Strings = setting((), "A2A_REQUIRED_SCOPES", "auth.required_scopes", "all of")
    auth_max_token_lifetime: float = setting(
        0.0,
        "JWT_MAX_TOKEN_LIFETIME",
        "auth.max_token_lifetime",
        "refuse JWTs expiring more than SECONDS ahead (0 = no maximum)",
        ge=0,
    )
    auth_jwks_cache_seconds: float = setting(
        300.0,
        "JWT_JWKS_CACHE_SECONDS",
        "auth.jwks_cache_seconds",
        "refresh the JWKS key set after this many seconds (in the background)",
        ge=0,
    )
    auth_jwks_refresh_cooldown: float = setting(
        30.0,
        "JWT_JWKS_REFRESH_COOLDOWN",
        "auth.jwks_refresh_cooldown",
        "an unknown kid refetches the key set at most this often (seconds)",
        ge=0,
    )
    auth_jwks_timeout: float = setting(
        10.0,
        "JWT_JWKS_TIMEOUT",
        "auth.jwks_timeout",
        "deadline of one JWKS fetch: connect, headers and body (seconds)",
        gt=0,
    )
    auth_jwks_unknown_kid_seconds: float = setting(
        60.0,
        "JWT_JWKS_UNKNOWN_KID_SECONDS",
        "auth.jwks_unknown_kid_seconds",
        "a kid missing from the key set is refused without a fetch for this long (seconds)",
        ge=0,
    )
    auth_jwks_backoff_max: float = setting(
        60.0,
        "JWT_JWKS_BACKOFF_MAX",
        "auth.jwks_backoff_max",
        "longest pause between JWKS fetches while the endpoint fails (seconds)",
        ge=0,
    )
    # -- push notifications ----------------------------------------------------------
    push_notifications: bool = setting(
        False, "PUSH_NOTIFICATIONS", "push.enabled", "send push notifications"
    )
    push_allow_insecure_urls: bool = setting(
        False,
        "A2A_PUSH_ALLOW_INSECURE_URLS",
        "push.allow_insecure_urls",
        "accept http:// and loopback webhooks (development only)",
    )
    push_timeout: float = setting(
        10.0, "A2A_PUSH_TIMEOUT", "push.timeout", "seconds per delivery attempt", gt=0
    )
    push_retry_delays: Numbers = setting(
        (1.0, 2.0, 4.0),
        "A2A_PUSH_RETRY_DELAYS",
        "push.retry_delays",
        "seconds before each retry (repeatable; env: comma-separated)",
        flag="--push-retry-delay",
    )
    push_max_configs_per_task: int = setting(
        10,
        "A2A_PUSH_MAX_CONFIGS_PER_TASK",
        "push.max_configs_per_task",
        "push configs one task may have",
        ge=1,
    )
    push_queue_size: int = setting(
        100, "A2A_PUSH_QUEUE_SIZE", "push.queue_size", "events waiting per push config", ge=1
    )
    push_signing_key: str | None = setting(
        None,
        "A2A_PUSH_SIGNING_KEY",
        "push.signing_key",
        "PEM key that signs deliveries",
        secret=True,
    )
    push_encryption_key: str | None = setting(
        None,
        "A2A_PUSH_ENCRYPTION_KEY",
        "push.encryption_key",
        "Fernet key encrypting stored push configs",
        secret=True,
    )
    # -- agent card signing ----------------------------------------------------------
    card_signing: bool = setting(
        False, "A2A_CARD_SIGNING", "card.signing", "sign the agent card (A2A 1.0 signatures)"
    )
    card_signing_key: str | None = setting(
        None,
        "A2A_CARD_SIGNING_KEY",
        "card.signing_key",
        "PEM or JWK private key file signing the card (created when missing)",
    )
    # -- gRPC ------------------------------------------------------------------------
    grpc_port: int | None = setting(None, "A2A_GRPC_PORT", "grpc.port", "serve gRPC on PORT")
    grpc_tls_cert: str | None = setting(
        None, "A2A_GRPC_TLS_CERT", "grpc.tls_cert", "gRPC TLS certificate (PEM file)"
    )
    grpc_tls_key: str | None = setting(
        None, "A2A_GRPC_TLS_KEY", "grpc.tls_key", "gRPC TLS private key (PEM file)"
    )
    grpc_reflection: bool = setting(
        False, "A2A_GRPC_REFLECTION", "grpc.reflection", "serve gRPC reflection"
    )
    # -- operations ------------------------------------------------------------------
    ops_details_public: bool = setting(
        False,
        "A2A_OPS_DETAILS_PUBLIC",
        "metrics.details_public",
        "show /metrics and /health details to callers without credentials",
    )
    process_tuning: bool | None = setting(
        None,
        "A2A_PROCESS_TUNING",
        "limits.process_tuning",
        "size the event loop's thread pool (sync_workers) and gc.freeze() after start "
        "(default: on under serve() and the CLI, off for an app you mount yourself)",
    )
    explorer: bool = setting(False, "A2A_EXPLORER", "explorer.enabled", "serve the Explorer")
    explorer_prefix: str = setting(
        "/explorer", "A2A_EXPLORER_PREFIX", "explorer.prefix", "path of the Explorer"
    )
    metrics: bool = setting(False, "A2A_METRICS", "metrics.enabled", "serve /metrics")
    telemetry: bool = setting(
        False, "A2A_TELEMETRY", "telemetry.enabled", "OpenTelemetry request and module spans"
    )
    sdk_telemetry: bool = setting(
        False, "A2A_SDK_TELEMETRY", "telemetry.sdk", "also the a2a-sdk's internal spans"
    )
    telemetry_legacy_names: bool = setting(
        False,
        "A2A_TELEMETRY_LEGACY_NAMES",
        "telemetry.legacy_names",
        "span names and attributes of apcore-a2a 0.1 instead of the OpenTelemetry A2A draft",
    )

    # ---------------------------------------------------------------------------------
    @field_validator("port", "grpc_port")
    @classmethod
    def _port(cls, value: int | None) -> int | None:
        if value is not None and not 1 <= value <= 65535:
            raise ValueError("must be between 1 and 65535")
        return value

    @model_validator(mode="after")
    def _workers_share_tasks(self) -> Settings:
        if self.workers > 1 and not self.cluster:
            raise ValueError(
                f"workers={self.workers} needs a shared SQL task store in cluster mode "
                "(--cluster --task-store sqlite:///path.db or postgresql://...)"
            )
        return self

    def public_url(self) -> str:
        """The base URL advertised on the card when ``url`` is not set."""
        return advertised_url(self.url, self.host, self.port)


#: Environment variable name -> setting name, for documentation and the CLI help.
ENV_VARS: dict[str, str] = {spec.env: spec.name for spec in Settings.specs()}
