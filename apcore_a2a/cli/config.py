"""``apcore-a2a config show|check|table``: inspect and validate the agent's configuration
(docs/configuration.md); each exits 1 with one line on stderr when something is wrong."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from apcore_a2a._settings_sources import empty_problem
from apcore_a2a._text import hide_url_secrets, message_line
from apcore_a2a.settings import SPECS, Settings, config_path

if TYPE_CHECKING:  # apcore_a2a.config loads apcore: only `config show` reads a file
    from apcore_a2a.config import AgentConfig


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``config`` command group (``config show``, ``config check``) to the CLI."""
    config = subparsers.add_parser("config", help="show or check the agent's configuration")
    commands = config.add_subparsers(dest="config_command", metavar="COMMAND", required=True)
    show = commands.add_parser(
        "show",
        help="print the effective settings (secrets masked)",
        description="Print the settings `serve` would use, from environment variables, the "
        "config file and defaults, with secrets masked and each value's source noted.",
    )
    show.add_argument("--config", metavar="FILE", help="agent config file (YAML) [env A2A_CONFIG]")
    show.set_defaults(func=_show)
    check = commands.add_parser(
        "check",
        help="validate a config file without starting the server",
        description="Load FILE, discover its modules and build the agent without serving "
        "it. Exit 0 when it would start, 1 (with the reason) when it would not.",
    )
    check.add_argument("file", metavar="FILE", help="agent config file (YAML)")
    check.set_defaults(func=_check)
    table = commands.add_parser(
        "table",
        help="print every setting as a Markdown table (file key, env var, flag, default)",
    )
    table.set_defaults(func=lambda _args: print(settings_table(), end="") or 0)


def _fail(exc: Exception) -> int:
    print(f"Error: {message_line(str(exc))}", file=sys.stderr)
    return 1


def _show(args: argparse.Namespace) -> int:
    from apcore_a2a.config import AgentConfig, load_config

    try:
        if args.config is not None and empty_problem("config", args.config):
            raise ValueError(f"--config: must not be empty (leave it out), got {args.config!r}")
        path = args.config or config_path()  # like serve: --config, then A2A_CONFIG
        config = load_config(path) if path else AgentConfig(path="")
        settings = config.settings()
    except ValueError as exc:
        return _fail(exc)
    print(render(settings, config, os.environ), end="")
    return 0


def _check(args: argparse.Namespace) -> int:
    from apcore_a2a.server.factory import A2AServerFactory

    try:
        factory = A2AServerFactory(None, config=args.file)
        _app, card = factory.create()
    except Exception as exc:  # any reason the agent would not start, as one line
        return _fail(exc)
    skills = ", ".join(skill.id for skill in card.skills)
    store = hide_url_secrets(factory.settings.task_store)
    print(
        f"{args.file}: OK - {len(card.skills)} skills ({skills}) at "
        f"{factory.settings.public_url()}, task store {store}"
    )
    return 0


def render(settings: Settings, config: AgentConfig, environ: Mapping[str, str]) -> str:
    """The settings as YAML in the config file's layout, each value with its source."""
    from apcore_a2a.config import SECTIONS

    masked = settings.masked()
    lines = [
        "# effective settings: flags > environment > file > defaults (secrets masked)",
        f"# file: {config.path or '(none)'}",
    ]

    def source(name: str) -> str:
        env = SPECS[name].env
        if environ.get(env):
            return f"env {env}"
        # A secret read from <ENV>_FILE (the order from_environ reads them in): name the
        # file, so the operator sees which one is used; its content stays masked.
        if SPECS[name].from_file and environ.get(env + "_FILE"):
            return f"env {env}_FILE ({environ[env + '_FILE']})"
        if name in config.lines:
            return f"file line {config.lines[name]}"
        return "default"

    for section, keys in SECTIONS.items():
        lines.append(f"{section}:")
        for key, name in keys.items():
            lines.append(f"  {key}: {_flow(masked[name])}  # {source(name)}")
    return "\n".join(lines) + "\n"


def settings_table() -> str:
    """Every setting as the Markdown table of docs/configuration.md."""
    defaults = Settings.defaults().model_dump()
    rows = [
        "| file key | environment variable | CLI flag | default |",
        "| --- | --- | --- | --- |",
    ]
    for spec in Settings.specs():
        default = defaults[spec.name]
        shown = "-" if default in (None, ()) else f"`{_flow(default).strip(chr(34))}`"
        flag = f"`{spec.flag}`"
        if spec.from_file:
            flag += f", `{spec.flag}-file`"
        env = f"`{spec.env}`" + (f", `{spec.env}_FILE`" if spec.from_file else "")
        rows.append(f"| `{spec.key}` | {env} | {flag} | {shown} |")
    return "\n".join(rows) + "\n"


def _flow(value: Any) -> str:
    # JSON is valid YAML flow syntax, so the output can be read back as a config file.
    return json.dumps(list(value) if isinstance(value, tuple) else value)
