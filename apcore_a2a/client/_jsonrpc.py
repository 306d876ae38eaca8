"""JSON-RPC 2.0 over HTTP for A2A: one request/reply, or a reply streamed as SSE."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import httpx

from apcore_a2a.client._results import decode_event, is_final
from apcore_a2a.client._spans import a2a_call
from apcore_a2a.client._sse import iter_sse
from apcore_a2a.client.errors import (
    A2AAuthenticationError,
    A2AConnectionError,
    InvalidAgentResponseError,
    error_from_rpc,
)

__all__ = ["call", "stream"]


def _envelope(method: str, params: Mapping[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": method, "params": params}


def _json(content: bytes | str) -> Any:
    try:
        return json.loads(content)
    except ValueError as exc:
        raise InvalidAgentResponseError(f"agent returned invalid JSON: {content[:200]!r}") from exc


def _result_of(payload: Any) -> Any:
    if not isinstance(payload, dict):
        raise InvalidAgentResponseError(f"agent returned a non-object reply: {payload!r:.200}")
    if payload.get("error") is not None:
        raise error_from_rpc(payload["error"])
    if "result" not in payload:
        if payload.get("jsonrpc") == "2.0":
            return None  # some 0.3 servers omit a null result (e.g. push config delete)
        raise InvalidAgentResponseError("agent reply has neither 'result' nor 'error'")
    return payload["result"]


def _check_status(response: httpx.Response) -> None:
    if response.is_success:
        return
    snippet = response.text[:200].strip()
    message = f"HTTP {response.status_code} from {response.url}" + (
        f": {snippet}" if snippet else ""
    )
    cls = A2AAuthenticationError if response.status_code in (401, 403) else A2AConnectionError
    raise cls(message, status_code=response.status_code)


async def call(
    http: httpx.AsyncClient, version: str, url: str, method: str, params: Mapping[str, Any]
) -> Any:
    """POST one request and return its ``result`` (raising the typed error otherwise)."""
    headers = {"A2A-Version": version}
    with a2a_call(method, version, url, params, headers) as seen:
        try:
            response = await http.post(url, json=_envelope(method, params), headers=headers)
        except httpx.TimeoutException as exc:
            raise A2AConnectionError(f"{method} to {url} timed out") from exc
        except httpx.TransportError as exc:
            raise A2AConnectionError(f"cannot reach {url}: {exc}") from exc
        _check_status(response)
        payload = _json(response.content)
        seen(payload)
        return _result_of(payload)


async def stream(
    http: httpx.AsyncClient,
    version: str,
    url: str,
    method: str,
    params: Mapping[str, Any],
    *,
    last_event_id: str | None = None,
    on_id: Callable[[str], None] | None = None,
) -> AsyncIterator[dict[str, Any]]:
    """POST a streaming request and yield client-shape events until a final one.

    *last_event_id* is sent as ``Last-Event-ID``; *on_id* gets each event's SSE id just
    before the event is yielded.
    """
    headers = {"A2A-Version": version, "Accept": "text/event-stream"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    body = _envelope(method, params)
    with a2a_call(method, version, url, params, headers) as seen:
        async for event in _events(http, url, headers, body, version, seen, on_id):
            yield event


async def _events(
    http: httpx.AsyncClient,
    url: str,
    headers: dict[str, str],
    body: dict[str, Any],
    version: str,
    seen: Callable[[Any], None],
    on_id: Callable[[str], None] | None,
) -> AsyncIterator[dict[str, Any]]:
    method = body["method"]
    try:
        async with http.stream("POST", url, json=body, headers=headers) as response:
            if not response.is_success:
                await response.aread()
                _check_status(response)
            if "text/event-stream" not in response.headers.get("content-type", ""):
                # Errors detected before streaming starts come back as plain JSON.
                payload = _json(await response.aread())
                seen(payload)
                event = decode_event(_result_of(payload), version)
                if event is not None:
                    yield event
                return
            async for sse in iter_sse(response.aiter_lines()):
                payload = _json(sse.data)
                if sse.event == "error" and not (isinstance(payload, dict) and "error" in payload):
                    raise error_from_rpc(payload)
                seen(payload)
                event = decode_event(_result_of(payload), version)
                if event is None:
                    continue
                if on_id is not None and sse.id is not None:
                    on_id(sse.id)
                yield event
                if is_final(event):
                    return
    except httpx.TimeoutException as exc:
        raise A2AConnectionError(f"{method} stream from {url} timed out") from exc
    except httpx.TransportError as exc:
        raise A2AConnectionError(f"{method} stream from {url} failed: {exc}") from exc
