"""The ``apcore-a2a`` command: ``serve`` plus the client, storage and config commands.

Exit codes: 0 success, 1 invalid configuration or runtime failure (a missing extra
included), 2 command-line usage error, 3 ``serve`` could not start what the configuration
names (task store unreachable, port in use); a failure is one line on stderr. The client
commands add theirs (``cli/client.py``: ``EXIT_CODES``, shown by ``--help``) and write the
agent's words with nothing that drives the terminal or hides from the reader (:func:`emit`).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from apcore_a2a._settings_sources import empty_problem
from apcore_a2a._text import message_line
from apcore_a2a._version import __version__
from apcore_a2a.upstream.interpreter_exit import end_process

__all__ = ["build_parser", "console", "main"]

#: What changes what a terminal shows without being seen: the format characters (Unicode
#: category Cf: bidi overrides and isolates that reorder a line, as in "Trojan Source";
#: zero-width characters; tags, invisible ASCII look-alikes) and the line and paragraph
#: separators (Zl, Zp: a line break to many readers, though JSON leaves them raw). Listed
#: (Unicode 15) rather than looked up at start-up; tests/client/test_cli.py checks the list
#: against this Python's Unicode database.
_INVISIBLE = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
    "\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
    "\U000e0020-\U000e007f"
)
#: halves of a surrogate pair: JSON may spell one alone, which no UTF-8 output takes
_SURROGATES = "\ud800-\udfff"
#: what a terminal may read as a command (ESC starts one; U+009B is CSI): C0, DEL and C1;
#: and the invisible characters and lone surrogates above
_CONTROLS = re.compile(f"[\x00-\x1f\x7f-\x9f{_INVISIBLE}{_SURROGATES}]")
#: what of those JSON leaves raw in its strings (it escapes C0 itself)
_JSON_RAW = re.compile(f"[\x7f-\x9f{_INVISIBLE}{_SURROGATES}]")


def emit(obj: Any, *, indent: int | None = None) -> None:
    """Print *obj* as JSON on stdout (one line unless *indent*), nothing raw in it."""
    # JSON escapes C0 in strings itself; the rest is escaped here (the same value; a
    # character past U+FFFF as its surrogate pair, as JSON spells it).
    text = json.dumps(obj, indent=indent, ensure_ascii=False)
    sys.stdout.write(_JSON_RAW.sub(lambda m: json.dumps(m[0])[1:-1], text) + "\n")
    sys.stdout.flush()


def printable(text: str) -> str:
    """*text* (the agent's words included) for a line on a terminal: one line
    (``message_line``: spaces inside a line kept), every control or invisible character as
    its ``\\xNN``/``\\uNNNN`` escape, so none is sent to the terminal raw."""
    return _CONTROLS.sub(lambda m: m[0].encode("unicode_escape").decode(), message_line(text))


def refuse_blank(args: argparse.Namespace) -> None:
    """Raise ``ValueError`` (exit 2, bad command input) naming the first argument of a
    client command given as an empty or blank string, or holding one (``--header``); a
    positional one (listed in ``args.positionals``) is named as its usage shows it. Read as
    "not given", a blank value would silently change the call: ``--token ""`` sent no
    credentials, ``--skill ""`` let the agent pick the skill, ``--context-id ""`` started a
    new conversation. The rule is the settings' (``serve`` follows it too:
    :func:`~apcore_a2a._settings_sources.empty_problem`). The message quotes a value by
    ``repr``, every character but a space escaped: it is printed as is, so that ``"  "``
    is quoted back as given, not as ``' '``."""
    positionals = getattr(args, "positionals", ())
    for dest, value in vars(args).items():
        problem = empty_problem(dest, value)
        if problem is None:
            continue
        if not isinstance(value, str):
            # Not shown: a repeated value is often a credential (--header 'X-API-Key: k').
            raise ValueError(f"--{dest.replace('_', '-')}: {problem}")
        if dest in positionals:
            raise ValueError(f"{dest.upper()}: {problem}, got {value!r}")
        raise ValueError(f"--{dest.replace('_', '-')}: {problem} (leave it out), got {value!r}")


def positive(value: str) -> float:
    """``--timeout``'s type: a positive number of seconds."""
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not number > 0:  # NaN too: the wait would end at once, as if the agent were slow
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {value!r}")
    return number


def build_parser() -> argparse.ArgumentParser:
    from apcore_a2a.cli import client, config, db, push, serve

    parser = argparse.ArgumentParser(
        prog="apcore-a2a", description="Serve and call A2A agents built from apcore modules."
    )
    parser.add_argument("--version", action="version", version=f"apcore-a2a {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in (serve, client, push, db, config):
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
        # Ctrl-C stops a server gracefully (0); it cuts a client command short (128 + SIGINT),
        # which a script must not read as the command's success.
        code = 0 if args.command == "serve" else 130
    sys.exit(code)


def console() -> NoReturn:
    """The console script and ``python -m apcore_a2a``: :func:`main`, then the process ends
    as Python's own exit ends it, but for the teardown of every module it loaded
    (``upstream/interpreter_exit.py``)."""
    try:
        main()
    except SystemExit as exc:
        if not isinstance(exc.code, int | None):
            raise  # a message to print: Python's own exit prints it
        code = exc.code or 0
    end_process(code)
