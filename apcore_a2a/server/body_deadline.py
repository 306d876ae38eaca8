"""A request body not fully received within ``body_timeout`` seconds of its head is
answered ``408 Request Timeout`` (``Connection: close``), on every route and binding.

A pure-ASGI middleware: it bounds the app's waits for body messages, not the connection
(uvicorn's side, ``upstream/request_heads.py``, bounds the wait for a head). Once
the body is complete nothing is bounded: the wait for a hang-up that follows (a stream
watching its client) lasts as long as the answer does.

When the deadline passes, the app is told the client left (``http.disconnect``), so it
stops reading, and whatever it sends after that is dropped; the client gets the 408
instead, or, when the answer had already started, the rest of it is dropped and uvicorn
closes the connection as the app returns with the answer unfinished.
"""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Message, Receive, Scope, Send

_ANSWER = b"request body not received in time\n"
_HEADERS = [
    (b"content-type", b"text/plain; charset=utf-8"),
    (b"content-length", str(len(_ANSWER)).encode()),
    (b"connection", b"close"),
]


class BodyDeadline:
    """Answer 408 to an HTTP request whose body is still arriving *body_timeout* seconds
    after the app was called (its head complete)."""

    def __init__(self, app: ASGIApp, body_timeout: float) -> None:
        self.app = app
        self.body_timeout = body_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        deadline = asyncio.get_running_loop().time() + self.body_timeout
        body_done = False
        started = False
        timed_out = False

        async def bounded_receive() -> Message:
            nonlocal body_done, timed_out
            if timed_out:
                return {"type": "http.disconnect"}
            if body_done:
                return await receive()
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                timed_out = True
                if not started:
                    await answer_timeout()
                return {"type": "http.disconnect"}
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_done = True
            return message

        async def answer_timeout() -> None:
            await send({"type": "http.response.start", "status": 408, "headers": _HEADERS})
            await send({"type": "http.response.body", "body": _ANSWER})

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if timed_out:
                return  # the 408 went out instead, or the answer is left unfinished
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await self.app(scope, bounded_receive, tracked_send)
