"""A setting's value refused with where it came from, as one line: the checks pydantic
cannot run while it reads the settings (a task store URL is parsed by the storage package)
and the CLI's own, against the same rule of showing values (:func:`masked_value`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from apcore_a2a._text import hide_url_secrets
from apcore_a2a.settings import SPECS, Settings, SettingsError, masked_value

__all__ = ["check_named", "value_refusal"]


def value_refusal(where: str | None, problem: object, name: str, value: str) -> SettingsError:
    """*problem* with *value* of setting *name*, as the one line starting with *where* it
    came from (``None``: no prefix). Wherever the message quotes the value it is shown as
    :func:`masked_value` shows it (a task store URL's password as ``***``), and no
    ``?password=`` is shown."""
    text, value = str(problem), value.strip()
    if value:
        shown = str(masked_value(SPECS[name], value))
        # quoted as is, or as its repr (a URL holding a quote or a backslash)
        text = text.replace(repr(value), repr(shown)).replace(value, shown)
    text = hide_url_secrets(text)
    return SettingsError(f"{where}: {text}" if where else text)


def check_named(
    settings: Settings, name: str, check: Callable[[Any], object], where: Callable[[str], str]
) -> None:
    """Run *check* on setting *name*'s value: a check pydantic cannot run here (the task
    store URL is parsed by the storage package). Its ``ValueError`` is re-raised as the
    :func:`value_refusal` naming where the value came from (*where*: the
    :meth:`Settings.namer` of the sources the settings were resolved from)."""
    value = getattr(settings, name)
    try:
        check(value)
    except ValueError as exc:
        raise value_refusal(where(name), exc, name, str(value)) from None
