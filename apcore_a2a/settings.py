"""One typed settings object for the whole agent.

Every knob is a field of :class:`Settings` (a ``pydantic-settings`` model) that declares, in
one place, its key in the agent config file, its environment variable (``A2A_<NAME>``, or
``JWT_<REST>`` for ``auth_<rest>``, unless it names another) and its command-line flag.
``serve()`` keyword arguments, CLI flags, environment variables and the config file all land
here; nothing else reads the environment. Precedence is *argument or flag > environment
variable > config file > default*, applied by :meth:`Settings.resolve`.

Secrets (``secret=True``) and URLs that may carry a password (``from_file=True``) can also
come from a file: ``<ENV>_FILE=/run/secrets/x`` or ``--<flag>-file PATH`` (the file's
content, without the trailing newline; for lists, one item per line), so they need not
appear in ``ps`` or the environment. Both forms at once, or an empty file, is an error.

Example::

    settings = Settings.resolve({"port": 9000}, environ={"A2A_HOST": "0.0.0.0"})
    assert settings.port == 9000 and settings.host == "0.0.0.0"
"""

from __future__ import annotations

from pydantic import model_validator
from pydantic_settings import SettingsConfigDict

from apcore_a2a import _settings_checks as checks
from apcore_a2a._settings_sources import (
    AuthType,
    LogFormat,
    LogLevel,
    Paths,
    Setting,
    SettingRefusal,
    SettingsError,
    SourcedSettings,
    Strings,
    config_path,
    file_value,
    forms,
    masked_value,
    read_secret_file,
    setting,
    source_of,
)
from apcore_a2a.shape import Shape

__all__ = [
    "ENV_VARS",
    "Setting",
    "SettingRefusal",
    "Settings",
    "SettingsError",
    "config_path",
    "file_value",
    "forms",
    "masked_value",
    "read_secret_file",
    "source_of",
]

_SHAPE = Shape()


class Settings(SourcedSettings):
    """Every configurable knob of an apcore-a2a agent, with its default.

    Build it with :meth:`resolve` (or ``Settings()`` for defaults plus ``os.environ``).
    """

    # Every float is a number of seconds or bytes: inf and nan would parse, then break.
    model_config = SettingsConfigDict(
        frozen=True, extra="forbid", validate_default=False, allow_inf_nan=False
    )

    # -- agent identity --------------------------------------------------------------
    name: str | None = setting(None, "agent.name", "agent name on the card")
    description: str | None = setting(None, "agent.description", "agent description on the card")
    version: str | None = setting(
        None, "agent.version", "agent version on the card", flag="--agent-version"
    )
    url: checks.HttpUrl = setting(
        None, "agent.url", "public base URL (default: the mount or http://HOST:PORT)"
    )
    default_skill: str | None = setting(
        None, "agent.default_skill", "skill for messages naming none"
    )
    route_by_schema: bool = setting(
        True, "agent.route_by_schema", "route skill-less messages by schema"
    )
    streaming: bool = setting(True, "agent.streaming", "serve streaming calls")
    # -- module sources (used when no registry is given) ------------------------------
    extensions_dirs: Paths = setting(
        (),
        "modules.extensions_dirs",
        "folder of apcore module files to discover",
        env="APCORE_EXTENSIONS_DIR",
        flag="--extensions-dir",
    )
    bindings_dirs: Paths = setting(
        (),
        "modules.bindings_dirs",
        "folder of *.binding.yaml files to load",
        env="APCORE_BINDINGS_DIR",
        flag="--bindings",
    )
    apcore_config: str | None = setting(
        None, "modules.apcore_config", "apcore config file (YAML)", env="APCORE_CONFIG_FILE"
    )
    acl: str | None = setting(None, "modules.acl", "apcore ACL file (YAML)")
    system_modules: Strings = setting(
        (),
        "modules.system_modules",
        "apcore system.* module to serve as a skill (system.control.* also need auth, the "
        "operator role and apcore's approval gate)",
        flag="--system-module",
    )
    # -- HTTP server -----------------------------------------------------------------
    host: checks.ListenHost = setting("127.0.0.1", "http.host", "address to listen on")
    port: checks.Port = setting(8000, "http.port", "port to listen on")
    workers: int = setting(
        1,
        "http.workers",
        f"server processes on this host, at most {checks.MAX_WORKERS} (2+: needs --cluster)",
        ge=1,
        le=checks.MAX_WORKERS,
    )
    rpc_path: checks.UrlPath = setting("/", "http.rpc_path", "JSON-RPC endpoint path")
    cors_origins: checks.Origins = setting(
        (), "http.cors_origins", "browser origin allowed to call the agent", flag="--cors-origin"
    )
    allowed_hosts: checks.HostNames = setting(
        (),
        "http.allowed_hosts",
        "Host headers to answer besides the loopback names (always answered: probes on "
        "the agent's machine); others get 400 (default: the url's host or a specific bind "
        "host; '*' = any)",
        flag="--allowed-host",
    )
    forwarded_allow_ips: Strings = setting(
        (),
        "http.forwarded_allow_ips",
        "proxy address or network whose X-Forwarded-For/-Proto is trusted, on the gRPC port "
        "its x-forwarded-for metadata (default: none; '*' = any peer)",
        flag="--forwarded-allow-ip",
    )
    header_timeout: checks.GrpcSeconds | None = setting(
        10.0,
        "http.header_timeout",
        "seconds a connection may take to send a request head (gRPC: a call), from its "
        "opening or its previous answer (0 = no bound)",
        ge=0,
    )
    body_timeout: float | None = setting(
        30.0,
        "http.body_timeout",
        "seconds a request body may take to arrive after its head; later: 408 (0 = no bound)",
        ge=0,
    )
    log_level: LogLevel = setting("info", "logging.level", "log level")
    log_format: LogFormat = setting("text", "logging.format", "text or json")
    # -- limits ----------------------------------------------------------------------
    max_body_bytes: int = setting(1024 * 1024, "limits.max_body_bytes", "largest body", ge=1)
    # The shape limits' defaults are Shape's own (what layered() uses without settings).
    max_json_depth: int = setting(
        _SHAPE.max_depth, "limits.max_json_depth", "deepest nesting of a JSON body", ge=1
    )
    max_json_values: int = setting(
        _SHAPE.max_values, "limits.max_json_values", "JSON values in a body", ge=1
    )
    max_parts_per_message: int = setting(
        _SHAPE.max_parts, "limits.max_parts_per_message", "parts in a message", ge=1
    )
    max_string_bytes: int = setting(
        _SHAPE.max_string_bytes,
        "limits.max_string_bytes",
        "bytes of JSON strings in a body, a file's bytes aside",
        ge=1,
    )
    shutdown_timeout: float = setting(
        30.0, "limits.shutdown_timeout", "seconds to drain on stop", ge=0
    )
    shutdown_force_timeout: float = setting(
        5.0,
        "limits.shutdown_force_timeout",
        "then seconds for work ignoring cancel, before the process exits with status 1 "
        "(0 = never: wait for it)",
        ge=0,
    )
    execution_timeout: float = setting(
        300.0, "limits.execution_timeout", "seconds a run may take", gt=0
    )
    max_streams: int = setting(50, "limits.max_streams", "concurrent SSE/gRPC streams", ge=0)
    max_streams_per_caller: int = setting(
        20,
        "limits.max_streams_per_caller",
        "concurrent streams one caller may hold (0 = no per-caller quota)",
        ge=0,
    )
    max_stream_backlog_bytes: int = setting(
        8 * 1024 * 1024,
        "limits.max_stream_backlog_bytes",
        "events (protobuf bytes) a stream keeps for a reader slower than its task; past it "
        "the stream ends with -32091 and the reader resubscribes",
        ge=1,
    )
    max_unfinished_tasks_per_caller: int = setting(
        1000,
        "limits.max_unfinished_tasks_per_caller",
        "unfinished tasks (running or waiting for input) one caller may hold (0 = no quota)",
        ge=0,
    )
    max_task_history_messages: int = setting(
        200,
        "limits.max_task_history_messages",
        "messages a task's history may hold; a follow-up to a task holding this many is "
        "refused (0 = no bound)",
        ge=0,
    )
    max_task_history_bytes: int = setting(
        2 * 1024 * 1024,
        "limits.max_task_history_bytes",
        "bytes (protobuf) a task's history may hold; a follow-up to a task holding this "
        "many is refused (0 = no bound)",
        ge=0,
    )
    ipv6_caller_prefix: int = setting(
        64, "limits.ipv6_caller_prefix", "anonymous IPv6 callers count as their /N", ge=48, le=128
    )
    cancel_on_disconnect: bool = setting(
        False, "limits.cancel_on_disconnect", "cancel a task when its only stream is dropped"
    )
    sync_workers: int = setting(32, "limits.sync_workers", "threads for sync modules", ge=1)
    sync_workers_per_caller: int | None = setting(
        None,
        "limits.sync_workers_per_caller",
        "sync_workers threads one caller may hold at once; its other calls wait their turn "
        "(default: 3/4 of sync_workers, leaving at least one to others; a single-owner "
        "agent may set it to sync_workers)",
        ge=1,
    )
    # -- storage ---------------------------------------------------------------------
    task_store: str = setting(
        "memory://",
        "storage.task_store",
        "memory://, sqlite:///path.db or postgresql://...",
        from_file=True,
    )
    task_max_capacity: int = setting(
        10_000, "storage.task_max_capacity", "tasks kept in memory", ge=1
    )
    task_ttl_seconds: float = setting(
        3600.0, "storage.task_ttl_seconds", "memory: finished task TTL", ge=0
    )
    task_event_log_size: int = setting(100, "storage.task_event_log_size", "events per task", ge=0)
    task_event_log_bytes: int = setting(
        4 * 1024 * 1024,
        "storage.task_event_log_bytes",
        "memory: bytes of events kept per task (its latest event is kept whatever its size)",
        ge=1,
    )
    task_event_log_total_bytes: int = setting(
        256 << 20, "storage.task_event_log_total_bytes", "memory: event bytes of all tasks", ge=1
    )
    task_retention_seconds: float | None = setting(
        None, "storage.task_retention_seconds", "SQL: delete finished tasks older than this", ge=0
    )
    cluster: bool = setting(False, "storage.cluster", "share tasks and streams with other replicas")
    cluster_poll_interval: float = setting(
        0.5, "storage.cluster_poll_interval", "seconds between event-table polls", gt=0
    )
    cluster_wakeups: bool = setting(
        True, "storage.cluster_wakeups", "wake streams at once on new events"
    )
    cluster_heartbeat_interval: float = setting(
        2.0, "storage.cluster_heartbeat_interval", "seconds between a replica's heartbeats", gt=0
    )
    cluster_replica_timeout: float = setting(
        10.0,
        "storage.cluster_replica_timeout",
        "seconds without a heartbeat before a replica counts as dead",
        gt=0,
    )
    # -- auth ------------------------------------------------------------------------
    auth_type: AuthType | None = setting(None, "auth.type", "bearer or apikey", env="A2A_AUTH_TYPE")
    auth_key: str | None = setting(
        None, "auth.jwt_key", "JWT secret or public key (PEM)", secret=True
    )
    auth_jwks_url: str | None = setting(
        None, "auth.jwks_url", "JWKS URL of the token issuer", from_file=True
    )
    auth_issuer: str | None = setting(None, "auth.issuer", "required JWT iss")
    auth_audience: str | None = setting(None, "auth.audience", "required JWT aud")
    auth_algorithms: Strings = setting(
        (), "auth.algorithms", "accepted JWT algorithms", flag="--auth-algorithm"
    )
    api_keys: Strings = setting(
        (),
        "auth.api_keys",
        "accepted API key: KEY, KEY=ID or KEY=ID:ROLE+ROLE",
        flag="--api-key",
        secret=True,
    )
    require_auth: bool = setting(True, "auth.require", "refuse calls without credentials")
    auth_require_exp: bool = setting(True, "auth.require_exp", "refuse JWTs without an exp claim")
    required_roles: Strings = setting((), "auth.required_roles", "any of")
    required_scopes: Strings = setting((), "auth.required_scopes", "all of")
    auth_max_token_lifetime: float = setting(
        0.0,
        "auth.max_token_lifetime",
        "refuse JWTs expiring more than SECONDS ahead (0 = no maximum)",
        ge=0,
    )
    auth_jwks_cache_seconds: float = setting(
        300.0,
        "auth.jwks_cache_seconds",
        "refresh the JWKS key set after this many seconds (in the background)",
        ge=0,
    )
    auth_jwks_refresh_cooldown: float = setting(
        30.0,
        "auth.jwks_refresh_cooldown",
        "an unknown kid refetches the key set at most this often (seconds)",
        ge=0,
    )
    auth_jwks_timeout: float = setting(
        10.0,
        "auth.jwks_timeout",
        "deadline of one JWKS fetch: connect, headers and body (seconds)",
        gt=0,
    )
    auth_jwks_unknown_kid_seconds: float = setting(
        60.0,
        "auth.jwks_unknown_kid_seconds",
        "a kid missing from the key set is refused without a fetch for this long (seconds)",
        ge=0,
    )
    auth_jwks_backoff_max: float = setting(
        60.0,
        "auth.jwks_backoff_max",
        "longest pause between JWKS fetches while the endpoint fails (seconds)",
        ge=0,
    )
    # -- push notifications ----------------------------------------------------------
    push_notifications: bool = setting(
        False, "push.enabled", "send push notifications", env="PUSH_NOTIFICATIONS"
    )
    push_allow_insecure_urls: bool = setting(
        False, "push.allow_insecure_urls", "accept http:// and loopback webhooks (development only)"
    )
    push_timeout: float = setting(10.0, "push.timeout", "seconds per delivery attempt", gt=0)
    push_dns_servers: checks.NameServers = setting(
        (),
        "push.dns_servers",
        "name server (IP, IP:port) webhook host names are looked up on (default: those of "
        "/etc/resolv.conf)",
        flag="--push-dns-server",
    )
    push_retry_delays: checks.Delays = setting(
        (1.0, 2.0, 4.0), "push.retry_delays", "seconds before each retry", flag="--push-retry-delay"
    )
    push_max_configs_per_task: int = setting(
        10, "push.max_configs_per_task", "push configs one task may have", ge=1
    )
    push_queue_size: int = setting(100, "push.queue_size", "events waiting per push config", ge=1)
    push_queue_bytes: int = setting(
        64 * 1024 * 1024, "push.queue_bytes", "bytes of events waiting, all push configs", ge=1
    )
    push_max_deliveries: int = setting(
        64,
        "push.max_deliveries",
        "webhook requests in flight at once (one caller's tasks: at most half)",
        ge=1,
    )
    push_signing_key: str | None = setting(
        None, "push.signing_key", "PEM key that signs deliveries", secret=True
    )
    push_encryption_key: checks.FernetKey = setting(
        None, "push.encryption_key", "Fernet key encrypting stored push configs", secret=True
    )
    # -- agent card signing ----------------------------------------------------------
    card_signing: bool = setting(False, "card.signing", "sign the agent card (A2A 1.0 signatures)")
    card_signing_key: str | None = setting(
        None,
        "card.signing_key",
        "PEM or JWK private key file signing the card (created when missing)",
    )
    # -- gRPC ------------------------------------------------------------------------
    grpc_port: checks.Port | None = setting(None, "grpc.port", "serve gRPC on PORT")
    grpc_tls_cert: str | None = setting(None, "grpc.tls_cert", "gRPC TLS certificate (PEM file)")
    grpc_tls_key: str | None = setting(None, "grpc.tls_key", "gRPC TLS private key (PEM file)")
    grpc_reflection: bool = setting(False, "grpc.reflection", "serve gRPC reflection")
    grpc_max_pending_requests: int = setting(
        100, "grpc.max_pending_requests", "calls a connection may have awaiting a request", ge=0
    )
    grpc_keepalive_time: checks.GrpcSeconds = setting(
        60.0,
        "grpc.keepalive_time",
        "seconds of quiet before a connection is pinged (0: grpc's 2 h)",
        ge=0,
    )
    grpc_keepalive_timeout: checks.GrpcSeconds = setting(
        20.0, "grpc.keepalive_timeout", "seconds a pinged connection has to answer", gt=0
    )
    # -- operations ------------------------------------------------------------------
    ops_details_public: bool = setting(
        False,
        "metrics.details_public",
        "show /metrics and /health details to callers without credentials",
    )
    process_tuning: bool | None = setting(
        None,
        "limits.process_tuning",
        "gc.freeze() after start (default: on under serve() and the CLI, off for an app you "
        "mount yourself)",
    )
    explorer: bool = setting(False, "explorer.enabled", "serve the Explorer")
    explorer_prefix: checks.ExplorerPrefix = setting(
        "/explorer", "explorer.prefix", "path of the Explorer"
    )
    metrics: bool = setting(False, "metrics.enabled", "serve /metrics")
    telemetry: bool = setting(False, "telemetry.enabled", "OpenTelemetry request and module spans")
    telemetry_legacy_names: bool = setting(
        False,
        "telemetry.legacy_names",
        "span names and attributes of apcore-a2a 0.1 instead of the OpenTelemetry A2A draft",
    )

    @model_validator(mode="after")
    def _workers_share_tasks(self) -> Settings:
        if self.workers > 1 and not self.cluster:
            raise ValueError(
                f"workers={self.workers} needs a shared SQL task store in cluster mode "
                "(--cluster --task-store sqlite:///path.db or postgresql://...)"
            )
        return self

    def public_url(self) -> str:
        """``url`` without its trailing slash, or ``http://host:port`` (a reachable host)."""
        if self.url:
            return self.url.rstrip("/")
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"http://{host}:{self.port}"


#: Environment variable name -> setting name, for documentation and the CLI help.
ENV_VARS: dict[str, str] = {spec.env: spec.name for spec in Settings.specs()}
#: Setting name -> its spec (the config file, the CLI's flags and ``config show`` look up).
SPECS: dict[str, Setting] = {spec.name: spec for spec in Settings.specs()}
