"""The ``apcore-a2a`` command: ``serve`` plus the client, storage and config commands.

Exit codes: 0 success, 1 invalid configuration or runtime failure (one-line message on
stderr), 2 command-line usage error.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any

from apcore_a2a._version import __version__

__all__ = ["build_parser", "main"]

# Subcommand groups owned by other modules; each exposes ``register(subparsers)``.
_COMMAND_MODULES = ("apcore_a2a._cli_client", "apcore_a2a._cli_db", "apcore_a2a._cli_config")


class CLIError(Exception):
    """A configuration problem reported as one line with exit code 1."""


def _add_serve(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "serve",
        help="serve apcore modules as an A2A agent",
        description="Serve apcore modules as an A2A agent. Flags win over environment "
        "variables, which win over the --config file, which wins over defaults.",
    )
    p.add_argument("--config", metavar="FILE", help="agent config file (YAML); see docs")
    src = p.add_argument_group("modules")
    src.add_argument(
        "--extensions-dir",
        action="append",
        metavar="DIR",
        help="folder of apcore module files to discover (repeatable)",
    )
    src.add_argument(
        "--bindings",
        action="append",
        metavar="DIR",
        help="folder of *.binding.yaml files to load (repeatable)",
    )
    src.add_argument("--acl", metavar="FILE", help="apcore ACL YAML file")
    src.add_argument("--default-skill", metavar="ID", help="skill for messages without skillId")
    agent = p.add_argument_group("agent card")
    agent.add_argument("--name")
    agent.add_argument("--description")
    agent.add_argument("--agent-version", dest="version", metavar="VERSION")
    agent.add_argument("--url", help="public base URL (default http://HOST:PORT)")
    http = p.add_argument_group("server")
    http.add_argument("--host")
    http.add_argument("--port", type=int)
    http.add_argument("--log-level", choices=["critical", "error", "warning", "info", "debug"])
    http.add_argument("--log-format", choices=["text", "json"])
    http.add_argument("--execution-timeout", type=float, metavar="SECONDS")
    http.add_argument("--shutdown-timeout", type=float, metavar="SECONDS")
    http.add_argument("--max-body-bytes", type=int, metavar="N")
    http.add_argument("--max-streams", type=int, metavar="N")
    http.add_argument("--cors-origin", dest="cors_origins", action="append", metavar="ORIGIN")
    store = p.add_argument_group("storage")
    store.add_argument(
        "--task-store",
        metavar="URL",
        help="memory:// (default), sqlite:///path.db or postgresql://...",
    )
    store.add_argument(
        "--cluster",
        action="store_true",
        default=None,
        help="share tasks and streams with other replicas (SQL stores)",
    )
    auth = p.add_argument_group("auth")
    auth.add_argument("--auth-type", choices=["bearer", "apikey"])
    auth.add_argument("--auth-key", metavar="KEY", help="JWT secret or public key (PEM)")
    auth.add_argument("--auth-jwks-url", metavar="URL")
    auth.add_argument("--auth-issuer")
    auth.add_argument("--auth-audience")
    auth.add_argument("--api-key", dest="api_keys", action="append", metavar="KEY[=ID]")
    ops = p.add_argument_group("features")
    ops.add_argument("--push-notifications", action="store_true", default=None)
    ops.add_argument("--push-allow-insecure-urls", action="store_true", default=None)
    ops.add_argument("--grpc-port", type=int)
    ops.add_argument("--explorer", action="store_true", default=None)
    ops.add_argument("--explorer-prefix")
    ops.add_argument("--metrics", action="store_true", default=None)
    ops.add_argument("--telemetry", action="store_true", default=None)
    p.set_defaults(func=_serve_command)


_SETTING_FLAGS = (
    "default_skill",
    "name",
    "description",
    "version",
    "url",
    "host",
    "port",
    "log_level",
    "log_format",
    "execution_timeout",
    "shutdown_timeout",
    "max_body_bytes",
    "max_streams",
    "cors_origins",
    "task_store",
    "cluster",
    "auth_type",
    "auth_key",
    "auth_jwks_url",
    "auth_issuer",
    "auth_audience",
    "api_keys",
    "push_notifications",
    "push_allow_insecure_urls",
    "grpc_port",
    "explorer",
    "explorer_prefix",
    "metrics",
    "telemetry",
)


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    return {k: getattr(args, k, None) for k in _SETTING_FLAGS if getattr(args, k, None) is not None}


def _serve_command(args: argparse.Namespace) -> int:
    from apcore_a2a._serve import run_app
    from apcore_a2a.server.factory import A2AServerFactory
    from apcore_a2a.settings import Settings

    overrides = _overrides(args)
    port = overrides.get("port")
    if port is not None and not 1 <= port <= 65535:
        raise CLIError("Error: --port must be between 1 and 65535")
    from apcore_a2a.config_file import ModuleSources, load_config

    if args.config:
        config = load_config(args.config)
        sources = config.module_sources(
            extensions_dirs=args.extensions_dir, bindings_dirs=args.bindings, acl=args.acl
        )
        base = config.base()
    else:
        env = Settings.resolve()
        sources = ModuleSources(
            extensions_dirs=tuple(
                args.extensions_dir or ([env.extensions_dir] if env.extensions_dir else [])
            ),
            bindings_dirs=tuple(args.bindings or ([env.bindings_dir] if env.bindings_dir else [])),
            acl=args.acl,
        )
        base = None
    timeout = Settings.resolve(overrides, base=base).execution_timeout
    factory = A2AServerFactory(sources.build_executor(timeout), settings=base, **overrides)
    app, card = factory.create()
    print(
        f"apcore-a2a {__version__}: serving {len(card.skills)} skills "
        f"({', '.join(s.id for s in card.skills)}) at {factory.settings.public_url()}",
        file=sys.stderr,
        flush=True,
    )
    run_app(app, factory.settings)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="apcore-a2a", description="Serve and call A2A agents built from apcore modules."
    )
    parser.add_argument("--version", action="version", version=f"apcore-a2a {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_serve(subparsers)
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``apcore-a2a`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        sys.exit(2)
    from apcore_a2a import _logging

    # Refined from the resolved settings (environment included) once serve starts.
    _logging.configure(
        level=str(getattr(args, "log_level", None) or "info"),
        fmt=getattr(args, "log_format", None) or "text",
    )
    try:
        code = args.func(args)
    except CLIError as exc:
        print(str(exc), file=sys.stderr)
        code = 1
    except (ValueError, TypeError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        code = 1
    except KeyboardInterrupt:
        code = 0
    sys.exit(code)
