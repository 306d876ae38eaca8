"""The ``apcore-a2a`` command: ``serve`` plus the client, storage and config commands.

Exit codes: 0 success, 1 invalid configuration or runtime failure (a missing extra
included), 2 command-line usage error, 3 ``serve`` could not start what the configuration
names (task store unreachable, port in use); a failure is one line on stderr. The client
commands add theirs (``cli/client.py``: ``EXIT_CODES``, shown by ``--help``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from apcore_a2a._version import __version__

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    from apcore_a2a.cli import client, config, db, serve

    parser = argparse.ArgumentParser(
        prog="apcore-a2a", description="Serve and call A2A agents built from apcore modules."
    )
    parser.add_argument("--version", action="version", version=f"apcore-a2a {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in (serve, client, db, config):
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
    from apcore_a2a._runner import StartupError
    from apcore_a2a.errors import MissingExtraError

    try:
        code = args.func(args)
    except (ValueError, TypeError, MissingExtraError, StartupError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        code = 3 if isinstance(exc, StartupError) else 1
    except KeyboardInterrupt:
        code = 0
    sys.exit(code)
