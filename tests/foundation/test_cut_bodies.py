"""A request whose body the client cut short runs nothing, however well what came parses.

A body that stopped before its ``Content-Length`` (the client hung up, or the body deadline
passed and 408 went out) was read as whole by the request record: a JSON body complete
but for the bytes the header promised was served, a task stored and its module run, for a
request its client never finished sending (and whose answer nobody reads).
"""

from __future__ import annotations

import json
import socket
import uuid
from typing import Any

import pytest
from apcore import Registry

from tests.foundation.conftest import serve_in_thread

#: how long a socket read may take: a hang guard only
GUARD = 30.0


class Note:
    description = "Note each call"

    def __init__(self) -> None:
        self.calls: list[Any] = []

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        self.calls.append(inputs.get("n"))
        return {}


def _body(binding: str, n: int) -> tuple[str, bytes]:
    """(path, body) of a message to t.note carrying *n* on *binding* ("rpc1.0", ...)."""
    message: dict[str, Any] = {"messageId": uuid.uuid4().hex, "metadata": {"skillId": "t.note"}}
    if binding == "rpc0.3":
        message.update(kind="message", role="user", parts=[{"kind": "data", "data": {"n": n}}])
    elif binding == "rest0.3":
        message.update(role="ROLE_USER", content=[{"data": {"data": {"n": n}}}])
    else:
        message.update(role="ROLE_USER", parts=[{"data": {"n": n}}])
    params = {"message": message}
    if binding.startswith("rest"):
        path = "/v1/message:send" if binding == "rest0.3" else "/message:send"
        return path, _json(params)
    method = "message/send" if binding == "rpc0.3" else "SendMessage"
    return "/", _json({"jsonrpc": "2.0", "id": n, "method": method, "params": params})


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()


def _post(url: str, binding: str, body: bytes, path: str, length: int) -> bytes:
    """POST *body* declared as *length* bytes: the answer if *body* is whole, else nothing
    (the client hangs up once the body is sent)."""
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=GUARD) as conn:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"A2A-Version: {binding[-3:]}\r\nContent-Length: {length}\r\n"
            "Connection: close\r\n\r\n"
        )
        conn.sendall(head.encode() + body)
        answer = b""
        while length == len(body) and (chunk := conn.recv(65536)):
            answer += chunk
    return answer


@pytest.mark.parametrize("binding", ["rpc1.0", "rpc0.3", "rest1.0", "rest0.3"])
def test_a_body_cut_short_runs_nothing(binding: str) -> None:
    note = Note()
    registry = Registry()
    registry.register("t.note", note)
    with serve_in_thread(registry) as url:
        path, whole = _body(binding, 1)
        assert _post(url, binding, whole, path, len(whole)).startswith(b"HTTP/1.1 200")
        path, cut = _body(binding, 2)
        _post(url, binding, cut, path, len(cut) + 10)
    # The server has stopped: every request it took has ended.
    assert note.calls == [1]
