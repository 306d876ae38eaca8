"""Talking to our server through the official a2a-sdk client."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.types import SendMessageRequest, Task

from .._sdk import peer_http
from .._support import ROOT

EXTENSIONS = str(ROOT / "examples" / "extensions")


async def client(base_url: str, *, streaming: bool = False) -> Client:
    config = ClientConfig(streaming=streaming, httpx_client=peer_http())
    return await ClientFactory(config).create_from_url(base_url)


async def send(c: Client, req: SendMessageRequest) -> Task:
    """Unary send; returns the task the server answered with."""
    result: Task | None = None
    async for response in c.send_message(req):
        if response.HasField("task"):
            result = response.task
    assert result is not None, "server answered without a task"
    return result


async def list_page(
    http: httpx.AsyncClient,
    headers: dict[str, str],
    rest: bool,
    token: str,
    params: dict[str, Any],
) -> dict[str, Any]:
    """One ``ListTasks`` page over REST or JSON-RPC (*params*: page size and filters)."""
    if token:
        params = {**params, "pageToken": token}
    if rest:
        reply = await http.get("/tasks", params=params, headers=headers)
        assert reply.status_code == 200, reply.text
        return dict(reply.json())
    body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": params}
    answer = (await http.post("/", json=body, headers=headers)).json()
    assert "result" in answer, answer
    return dict(answer["result"])


async def walk_pages(
    http: httpx.AsyncClient,
    headers: dict[str, str],
    rest: bool,
    filters: dict[str, str],
    page_size: int,
    matching: Callable[[dict[str, str]], list[str]],
    between: Callable[[list[str]], Awaitable[None]],
) -> int:
    """Page through the caller's tasks with *filters* to the end; returns the pages read.

    Each page must be the next *page_size* of what *matching(filters)* says the list is
    when the page is asked for (the caller's matching ids, in the list's order), after the
    last id of the page before; ``totalSize`` all of them. *between(later_ids)* changes
    the tasks before each next page (*later_ids*: the ones expected after this page)."""
    token, last, pages = "", None, 0
    while True:
        expected = matching(filters)
        if last is not None:
            expected = expected[expected.index(last) + 1 :]
        page = await list_page(http, headers, rest, token, {"pageSize": page_size, **filters})
        ids = [task["id"] for task in page["tasks"]]
        assert ids == expected[:page_size], (filters, rest, pages)
        assert page["totalSize"] == len(matching(filters)), (filters, pages)
        pages += 1
        token = page.get("nextPageToken", "")
        assert bool(token) == (len(expected) > page_size), (filters, pages)
        if not token:
            return pages
        last = ids[-1]
        await between(expected[page_size:])
