"""How much of an agent's answer the client reads, and how it reads JSON.

An agent is not trusted with the client's memory: an answer, and each stream event, is read
up to :data:`MAX_ANSWER_BYTES` (decoded: a compressed body counts inflated; gRPC: each
message, the channel's receive limit), an error answer up to :data:`MAX_ERROR_BYTES`, and a
deeper JSON than Python can parse is an invalid answer, not a ``RecursionError``.
"""

from __future__ import annotations

import asyncio
import json
import zlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx

from apcore_a2a._json import unique_keys
from apcore_a2a.client.errors import A2AConnectionError, InvalidAgentResponseError

#: The largest answer the client reads, decoded: a result, or one event of a stream.
MAX_ANSWER_BYTES = 64 * 1024 * 1024
#: What of an error answer is read for the one line that says what went wrong.
MAX_ERROR_BYTES = 64 * 1024
#: The most one step of inflating a body makes, whatever the chunk it was given.
CHUNK_BYTES = 64 * 1024
#: The content codings the client inflates (zlib's window bits for each) and asks for.
_WBITS = {"gzip": zlib.MAX_WBITS | 16, "x-gzip": zlib.MAX_WBITS | 16, "deflate": zlib.MAX_WBITS}
ACCEPT_ENCODING = "gzip, deflate"
#: codings httpx inflates whole when their package is installed; the client does not ask
#: for them, and refuses them
_REFUSED = frozenset({"br", "zstd"})


async def _inflated(chunks: AsyncIterator[bytes], coding: str) -> AsyncIterator[bytes]:
    """*chunks* inflated from *coding*, at most :data:`CHUNK_BYTES` a step (a deflate body
    without its zlib header read raw, as httpx reads it)."""
    inflater, first = zlib.decompressobj(_WBITS[coding]), True
    async for data in chunks:
        while not inflater.eof:
            try:
                out = inflater.decompress(data, CHUNK_BYTES)
            except zlib.error as exc:
                if not (first and coding == "deflate"):
                    raise httpx.DecodingError(
                        f"not in its content encoding {coding}: {exc}"
                    ) from None
                inflater, first = zlib.decompressobj(-zlib.MAX_WBITS), False
                continue
            first, data = False, inflater.unconsumed_tail
            if out:
                yield out
            if not data and len(out) < CHUNK_BYTES:  # nothing left of it, nor pending
                break


async def decoded(response: httpx.Response) -> AsyncIterator[bytes]:
    """*response*'s body in the content codings it names, undone last first; a coding
    httpx does not know is passed over, as httpx does; ``httpx.DecodingError`` for a body
    not in its coding, or in one the client does not inflate step by step."""
    if response.is_stream_consumed:  # read whole already (made in this process): decoded
        yield response.content
        return
    header = response.headers.get("content-encoding", "")
    chunks = response.aiter_raw()
    for coding in reversed([c.strip().lower() for c in header.split(",")]):
        if coding in _REFUSED:
            raise httpx.DecodingError(f"content encoding {coding} is not one the client reads")
        if coding in _WBITS:
            chunks = _inflated(chunks, coding)
    async for chunk in chunks:
        yield chunk


async def read_at_most(response: httpx.Response, limit: int) -> tuple[bytearray, bool]:
    """Up to *limit* bytes of *response*'s decoded body, and whether that is all of it (a
    larger body is not read further: the response is closed). The buffer it was read into,
    not a copy: an answer of many MiB is held once."""
    body = bytearray()
    async for chunk in decoded(response):
        body += chunk
        if len(body) > limit:
            await response.aclose()
            del body[limit:]
            return body, False
    return body, True


def parse_json(content: str | bytes | bytearray) -> tuple[Any, str | None]:
    """*content* as JSON and ``None``, else ``None`` and why it is not (too deep to parse
    is a ``RecursionError``): the reason, not the parser's error, whose ``doc`` keeps the
    whole text (up to :data:`MAX_ANSWER_BYTES`) for as long as an error chained to it is.
    An object naming a key twice, which readers take each their own way (Python's the
    last value, protobuf's none), is no JSON, as the agent reads a request (``_json``)."""
    try:
        return json.loads(content, object_pairs_hook=unique_keys), None
    except (ValueError, RecursionError) as exc:
        return None, str(exc)


async def get_at_most(
    http: httpx.AsyncClient, url: str, limit: int, headers: Mapping[str, str] | None = None
) -> tuple[httpx.Response, bytearray, bool]:
    """GET *url*, the whole answer within *http*'s read timeout (not each read): the
    response, up to *limit* bytes of its decoded body (of an error status, up to
    :data:`MAX_ERROR_BYTES`) and whether that is all of it. A timeout or a failed
    connection raises :class:`A2AConnectionError`; a body that is not in its content
    encoding, ``httpx.DecodingError``."""
    try:
        async with (
            asyncio.timeout(http.timeout.read),
            http.stream("GET", url, headers=headers) as response,
        ):
            limit = limit if response.is_success else min(limit, MAX_ERROR_BYTES)
            return response, *await read_at_most(response, limit)
    except (httpx.TimeoutException, TimeoutError):
        raise A2AConnectionError(f"timed out fetching {url}") from None
    except httpx.TransportError as exc:
        raise A2AConnectionError(f"cannot reach {url}: {exc}") from None


def too_large(what: str) -> InvalidAgentResponseError:
    """The error of *what* (an answer, an event) past :data:`MAX_ANSWER_BYTES`."""
    return InvalidAgentResponseError(f"{what} is larger than {MAX_ANSWER_BYTES} bytes")
