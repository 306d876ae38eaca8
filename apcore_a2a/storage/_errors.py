"""Storage errors."""

from __future__ import annotations

__all__ = ["StoreUnavailableError"]


class StoreUnavailableError(Exception):
    """The task store cannot be reached or used right now.

    The message names the store with its password masked, so it is safe to show to
    operators and in ``/health`` responses.
    """
