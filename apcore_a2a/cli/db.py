"""``apcore-a2a db ...``: database maintenance for SQL task stores."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys

from apcore_a2a._text import message_line


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``db`` command group (``db upgrade``) to the CLI."""
    db = subparsers.add_parser("db", help="manage the task store database")
    db_commands = db.add_subparsers(dest="db_command", metavar="COMMAND", required=True)
    upgrade = db_commands.add_parser(
        "upgrade",
        help="create missing tables and apply the a2a-sdk migrations (incl. cluster tables)",
        description=(
            "Create the task store tables, apply the a2a-sdk's schema migrations (which add "
            "the task_versions/task_events tables cluster mode needs), and report what changed."
        ),
    )
    upgrade.add_argument(
        "--task-store",
        metavar="URL",
        default=None,
        help="sqlite:///path/tasks.db or postgresql://user@host/db (default: A2A_TASK_STORE)",
    )
    upgrade.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also print the migration tool's log (Alembic's INFO lines)",
    )
    upgrade.set_defaults(func=_upgrade)


def _upgrade(args: argparse.Namespace) -> int:
    from apcore_a2a._runner import store_hint
    from apcore_a2a._settings_refusals import value_refusal
    from apcore_a2a.cli.serve import flag_named
    from apcore_a2a.settings import SPECS, Settings, SettingsError, source_of
    from apcore_a2a.storage.migrations import upgrade_database

    given = {"task_store": args.task_store}
    # Where the task store came from, as a refusal of it starts: the flag, the variable or
    # its _FILE; None for the default.
    source = source_of("task_store", given, os.environ, Settings.specs())
    where = {"task_store": "--task-store", SPECS["task_store"].key: None}.get(source, source)
    try:
        url = Settings.resolve(given).task_store
    except SettingsError as exc:
        print(f"error: {flag_named(str(exc), args)}", file=sys.stderr)
        return 2
    # The SDK's migrations log each step at INFO (on Alembic's loggers and the root one).
    loggers = [] if args.verbose else [logging.getLogger(name) for name in ("", "alembic")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    try:
        lines = asyncio.run(upgrade_database(url))
    except ValueError as exc:  # a URL no SQL store takes: named as where it came from
        print(f"error: {value_refusal(where, exc, 'task_store', url)}", file=sys.stderr)
        return 2
    except Exception as exc:  # connection or SQL failure: say what, without a traceback
        cause = getattr(exc, "orig", None) or exc
        said = message_line(f"{type(cause).__name__}: {cause}")
        hint = store_hint(f"{said} {url}")
        print(f"error: upgrade failed: {said}; {hint}", file=sys.stderr)
        return 1
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
    for line in lines:
        print(line)
    return 0
