"""The error every command reports as one line with exit code 1."""

from __future__ import annotations

__all__ = ["CLIError"]


class CLIError(Exception):
    """A configuration problem reported as one line with exit code 1."""
