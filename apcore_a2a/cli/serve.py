"""``apcore-a2a serve``: serve apcore modules as an A2A agent.

Its flags are generated from :mod:`apcore_a2a.settings`: every setting with a flag gets one
(booleans also a ``--no-`` form, list settings repeat), and every setting that can hold a
secret also a ``--<flag>-file PATH`` form (giving both forms is a usage error).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args, get_origin

from apcore_a2a._settings_sources import empty_problem
from apcore_a2a._version import __version__
from apcore_a2a.settings import SPECS, Setting, Settings, SettingsError, file_value

if TYPE_CHECKING:
    from a2a.types import AgentCard

_FILE_SUFFIX = "__file"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "serve",
        help="serve apcore modules as an A2A agent",
        description="Serve apcore modules as an A2A agent. Flags win over environment "
        "variables, which win over the --config file, which wins over defaults.",
    )
    p.add_argument("--config", metavar="FILE", help="agent config file (YAML) [env A2A_CONFIG]")
    groups: dict[str, Any] = {}
    for spec in Settings.specs():
        section = spec.key.split(".", 1)[0]
        if section not in groups:
            groups[section] = p.add_argument_group(section)
        _add_flag(groups[section], spec)
    p.set_defaults(func=_serve_command)


def _add_flag(group: Any, spec: Setting) -> None:
    kind, flag = spec.annotation, spec.flag
    options: dict[str, Any] = {"dest": spec.name, "help": f"{spec.help} [env {spec.env}]"}
    if kind is bool:
        options["action"] = argparse.BooleanOptionalAction
    elif get_origin(kind) is tuple:
        options |= {"action": "append", "type": get_args(kind)[0], "metavar": "VALUE"}
    elif get_origin(kind) is Literal:
        options["choices"] = get_args(kind)
    else:
        options |= {"type": kind, "metavar": {int: "N", float: "SECONDS"}.get(kind, "VALUE")}
    if spec.from_file:
        # One value, two ways to give it: argparse refuses both (exit 2), none is dropped.
        group = group.add_mutually_exclusive_group()
    group.add_argument(flag, **options)
    if spec.from_file:
        group.add_argument(
            flag + "-file",
            dest=spec.name + _FILE_SUFFIX,
            metavar="PATH",
            help=f"read {flag} from a file (keeps it out of ps and the environment)",
        )


def overrides_from(args: argparse.Namespace) -> dict[str, Any]:
    """The settings the command line gives explicitly (flags and secret files)."""
    out: dict[str, Any] = {}
    for spec in Settings.specs():
        value = getattr(args, spec.name, None)
        path = getattr(args, spec.name + _FILE_SUFFIX, None)
        if value is None and path is not None:
            value = file_value(spec, path, f"{spec.flag}-file")
        if value is not None:
            out[spec.name] = value
    return out


def extension_ids_notice(extensions_dirs: Sequence[str]) -> str | None:
    """The startup line explaining module ids when several extension folders are given:
    apcore then prefixes each id with its folder's name (``ext/a/b.py`` -> ``ext.a.b``)."""
    if len(extensions_dirs) < 2:
        return None
    names = ", ".join(Path(d).resolve().name for d in extensions_dirs)
    return (
        f"apcore-a2a: {len(extensions_dirs)} extension folders ({names}): each module id "
        "starts with its folder's name"
    )


def banner_line(card: AgentCard, executor: Any, url: str) -> str:
    """The line ``serve`` starts with: the skills an anonymous caller sees (the public
    card's), then those only callers the ACL or the operator rule admit may call."""
    from apcore_a2a.execution.identity import visible_modules

    ids = [skill.id for skill in card.skills]
    public = visible_modules(executor, None, ids)
    shown = ", ".join(i for i in ids if i in public)
    line = f"apcore-a2a {__version__}: serving {len(public)} skills ({shown}) at {url}"
    restricted = [i for i in ids if i not in public]
    if restricted:
        line += f"; for authorized callers only: {', '.join(restricted)}"
    return line


def flag_named(message: str, args: argparse.Namespace) -> str:
    """*message* with a setting given on the command line named as the flag used: its
    ``--<flag>-file`` form when the value was read from a file."""
    name, colon, rest = message.partition(":")
    if not colon or name not in SPECS:
        return message
    if getattr(args, name + _FILE_SUFFIX, None) is not None:
        return SPECS[name].flag + "-file" + colon + rest
    return SPECS[name].flag + colon + rest if getattr(args, name, None) is not None else message


def _serve_command(args: argparse.Namespace) -> int:
    from apcore_a2a._runner import run
    from apcore_a2a.server.factory import A2AServerFactory

    if args.config is not None and empty_problem("config", args.config):
        # "" would fall back to A2A_CONFIG, or to no file: one rule with the settings' flags
        raise SettingsError(f"--config: must not be empty (leave it out), got {args.config!r}")
    overrides = overrides_from(args)
    try:
        factory = A2AServerFactory(None, config=args.config, standalone=True, **overrides)
        app, card = factory.create()
    except SettingsError as exc:
        raise SettingsError(flag_named(str(exc), args)) from None
    notice = extension_ids_notice(factory.settings.extensions_dirs)

    said = banner_line(card, factory.executor, factory.settings.public_url())

    def banner() -> None:  # once it serves: a start-up failure is the only line then
        if notice:
            print(notice, file=sys.stderr, flush=True)
        print(said, file=sys.stderr, flush=True)

    return run(factory, banner, app)
