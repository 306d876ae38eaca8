"""``apcore-a2a config show|check``: inspect and validate the agent's configuration.

``config show [--config FILE]`` prints the effective settings (environment over file over
defaults) as YAML in the config file's own layout, secrets masked, each line marked with
where its value came from. ``config check FILE`` loads the file, finds the modules and
builds the app without serving it. Both exit 1 with one line on stderr when something
is wrong.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import sys
from collections.abc import Mapping
from typing import Any

from apcore_a2a.config_file import (
    SECTIONS,
    AgentConfig,
    ModuleSources,
    load_config,
)
from apcore_a2a.settings import Settings

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``config`` command group (``config show``, ``config check``) to the CLI."""
    config = subparsers.add_parser("config", help="show or check the agent's configuration")
    commands = config.add_subparsers(dest="config_command", metavar="COMMAND")
    commands.required = True
    show = commands.add_parser(
        "show",
        help="print the effective settings (secrets masked)",
        description="Print the settings `serve` would use, from environment variables, the "
        "config file and defaults, with secrets masked and each value's source noted.",
    )
    show.add_argument("--config", metavar="FILE", help="agent config file (YAML)")
    show.set_defaults(func=_show)
    check = commands.add_parser(
        "check",
        help="validate a config file without starting the server",
        description="Load FILE, discover its modules and build the agent without serving "
        "it. Exit 0 when it would start, 1 (with the reason) when it would not.",
    )
    check.add_argument("file", metavar="FILE", help="agent config file (YAML)")
    check.set_defaults(func=_check)


def _fail(exc: Exception) -> int:
    print(f"Error: {' '.join(str(exc).split())}", file=sys.stderr)
    return 1


def _show(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config) if args.config else AgentConfig(path="")
        settings = config.settings()
    except ValueError as exc:
        return _fail(exc)
    sources = config.module_sources()
    print(render(settings, sources, config, os.environ), end="")
    return 0


def _check(args: argparse.Namespace) -> int:
    from apcore_a2a.server.factory import A2AServerFactory

    try:
        config = load_config(args.file)
        executor = config.module_sources().build_executor()
        factory = A2AServerFactory(executor, settings=config.base())
        _app, card = factory.create()
    except Exception as exc:  # any reason the agent would not start, as one line
        return _fail(exc)
    skills = ", ".join(skill.id for skill in card.skills)
    store = _hide_password(factory.settings.task_store)
    print(
        f"{args.file}: OK - {len(card.skills)} skills ({skills}) at "
        f"{factory.settings.public_url()}, task store {store}"
    )
    return 0


def render(
    settings: Settings,
    sources: ModuleSources,
    config: AgentConfig,
    environ: Mapping[str, str],
) -> str:
    """The settings as YAML in the config file's layout, each value with its source."""
    masked = {k: _hide_password(v) for k, v in settings.masked().items()}
    env_names = {f.name: f.metadata["env"] for f in dataclasses.fields(Settings)}
    lines = [
        "# effective settings: flags > environment > file > defaults (secrets masked)",
        f"# file: {config.path or '(none)'}",
    ]

    def source(key: str, env: str | None) -> str:
        if env and environ.get(env):
            return f"env {env}"
        if key in config.lines:
            return f"file line {config.lines[key]}"
        return "default"

    lines.append("modules:")
    module_env = {
        "extensions_dirs": "APCORE_EXTENSIONS_DIR",
        "bindings_dirs": "APCORE_BINDINGS_DIR",
    }
    for key in ("extensions_dirs", "bindings_dirs", "apcore_config", "acl"):
        value = getattr(sources, key)
        origin = source(f"modules.{key}", module_env.get(key))
        lines.append(f"  {key}: {_flow(value)}  # {origin}")
    for section, keys in SECTIONS.items():
        lines.append(f"{section}:")
        for key, name in keys.items():
            lines.append(f"  {key}: {_flow(masked[name])}  # {source(name, env_names[name])}")
    return "\n".join(lines) + "\n"


_USERINFO = re.compile(r"^(\w[\w+.-]*://[^:/@]*):[^@/]*@")


def _hide_password(value: Any) -> Any:
    # Database and JWKS URLs may carry a password in their user-info part.
    return _USERINFO.sub(r"\1:***@", value) if isinstance(value, str) else value


def _flow(value: Any) -> str:
    # JSON is valid YAML flow syntax, so the output can be read back as a config file.
    return json.dumps(list(value) if isinstance(value, tuple) else value)
