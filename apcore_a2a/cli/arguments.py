"""What the client commands refuse of their arguments before any request: an empty or
blank string, and a ``--timeout`` that is not a positive number of seconds.

Read as "not given", a blank value would silently change the call: ``--token ""`` sent no
credentials, ``--skill ""`` let the agent pick the skill, ``--context-id ""`` started a new
conversation. The settings of ``serve`` follow the same rule (docs/configuration.md).
"""

from __future__ import annotations

import argparse

from apcore_a2a._settings_sources import empty_problem


def refuse_blank(args: argparse.Namespace) -> None:
    """Raise ``ValueError`` (exit 2, bad command input) naming the first argument of a
    client command given as an empty or blank string, or holding one (``--header``); a
    positional one (listed in ``args.positionals``) is named as its usage shows it. The
    rule is the settings' (:func:`~apcore_a2a._settings_sources.empty_problem`). The
    message quotes a value by ``repr``, every character but a space escaped: it is printed
    as is, so that ``"  "`` is quoted back as given, not as ``' '``."""
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
