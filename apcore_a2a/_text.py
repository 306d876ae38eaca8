"""A text of several lines as one line for a person: the one rule the server's messages and
the client's errors share (a leaf: it imports nothing, so every room may import it)."""

from __future__ import annotations


def message_line(text: str) -> str:
    """*text* (pydantic's, YAML's and a database's messages run to several lines) as one
    line for a person to read: its lines joined by a space, each stripped. Spaces inside a
    line stay as they are: a refusal quoting ``'no  such'`` must not say ``'no such'``.
    (``adapters.errors.one_line`` is for a log argument: it escapes the line breaks
    instead.)"""
    return " ".join(line.strip() for line in text.splitlines() if line.strip())
