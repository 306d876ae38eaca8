"""Agent card discovery with a TTL cache."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from apcore_a2a.client.errors import A2AConnectionError, A2ADiscoveryError

#: Well-known card locations, tried in order: A2A 1.0 / 0.3, then the pre-0.3 name.
CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")


class AgentCardFetcher:
    """Fetches an agent's card and keeps it for ``ttl`` seconds (monotonic clock).

    A stale card with an ``ETag`` is refetched conditionally (``304`` keeps it). With
    *verify*, every card fetched is replaced by what ``verify(card)`` returns before caching.

    Example::

        async with httpx.AsyncClient() as http:
            fetcher = AgentCardFetcher(http, "https://agent.example.com", ttl=60)
            card = await fetcher.fetch()       # HTTP request
            card = await fetcher.fetch()       # served from the cache
    """

    def __init__(
        self,
        http: httpx.AsyncClient,
        base_url: str,
        *,
        ttl: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        verify: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]] | None = None,
    ) -> None:
        if ttl < 0:
            raise ValueError("ttl must be >= 0")
        self._http = http
        self._base = base_url.rstrip("/")
        self._ttl = ttl
        self._clock = clock
        self._verify = verify
        self._card: dict[str, Any] | None = None
        self._fetched_at = 0.0
        self._etag: str | None = None
        self._path: str | None = None

    @property
    def cached(self) -> dict[str, Any] | None:
        """The last fetched card (possibly stale), or ``None`` before the first fetch."""
        return self._card

    @property
    def card_url(self) -> str | None:
        """The URL the card was last fetched from."""
        return self._base + self._path if self._path else None

    def invalidate(self) -> None:
        """Forget the cached card; the next :meth:`fetch` goes to the network."""
        self._card, self._etag, self._path = None, None, None

    async def fetch(self, *, refresh: bool = False) -> dict[str, Any]:
        """Return the agent card, from the cache while it is younger than ``ttl``.

        Raises :class:`A2ADiscoveryError` (no card at any well-known path, or not a JSON
        card) or :class:`A2AConnectionError` (the agent cannot be reached).
        """
        if self._card is not None and not refresh and self._clock() - self._fetched_at < self._ttl:
            return self._card
        paths = [self._path] if self._path else list(CARD_PATHS)
        failures: list[str] = []
        for path in paths:
            # An ETag is kept with the card and path it came from (one path to try then).
            etag = {"If-None-Match": self._etag} if self._etag else {}
            try:
                response = await self._http.get(
                    self._base + path, headers={"Accept": "application/json"} | etag
                )
            except httpx.TimeoutException as exc:
                raise A2AConnectionError(f"timed out fetching the agent card: {exc}") from exc
            except httpx.TransportError as exc:
                raise A2AConnectionError(f"cannot reach {self._base}: {exc}") from exc
            if response.status_code == 304 and self._card is not None:
                self._fetched_at = self._clock()
                return self._card
            if response.is_success:
                try:
                    parsed = json.loads(response.content)
                except ValueError as exc:
                    raise A2ADiscoveryError(
                        f"agent card at {response.url} is not valid JSON"
                    ) from exc
                if not isinstance(parsed, dict) or not isinstance(parsed.get("name"), str):
                    raise A2ADiscoveryError(f"{response.url} did not return an agent card object")
                card: dict[str, Any] = parsed
                if self._verify is not None:
                    card = await self._verify(card)
                self._card, self._path = card, path
                self._etag = response.headers.get("etag")
                self._fetched_at = self._clock()
                return card
            failures.append(f"{path} → HTTP {response.status_code}")
        raise A2ADiscoveryError(f"no agent card at {self._base}: " + "; ".join(failures))
