"""A file part for a skill that takes no file: ContentTypeNotSupportedError on every binding.

A2A (§3.3.2, §5.4): a part of a media type the agent does not accept answers
ContentTypeNotSupportedError: JSON-RPC -32005, HTTP 400, gRPC INVALID_ARGUMENT; no task
is created. ``math.add`` of the examples takes two integers and no file.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest
from a2a.types import Message, Part, Role, SendMessageRequest
from a2a.utils.errors import ContentTypeNotSupportedError

from tests._sdk import make_client

from .._support import ROOT, TLS, cli_server, free_port

V10 = {"A2A-Version": "1.0"}
ODD = "application/x-unsupported-tck-type"


@pytest.fixture(scope="module")
def agent() -> Iterator[str]:
    args = [
        "--extensions-dir",
        str(ROOT / "examples" / "extensions"),
        "--grpc-port",
        str(free_port()),
    ]
    with cli_server(args) as (url, _proc):
        yield url


def _message() -> dict[str, object]:
    return {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"raw": "dGNr", "mediaType": ODD}],
        "metadata": {"skillId": "math.add"},
    }


async def test_jsonrpc_and_rest_answer_content_type_not_supported(agent: str) -> None:
    async with httpx.AsyncClient(base_url=agent, timeout=30, verify=TLS) as http:
        rpc = await http.post(
            "/",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {"message": _message()},
            },
            headers=V10,
        )
        error = rpc.json()["error"]
        assert error["code"] == -32005, error
        assert ODD in error["message"] and "no file input" in error["message"]
        rest = await http.post("/message:send", json={"message": _message()}, headers=V10)
        assert rest.status_code == 400, rest.text  # A2A 1.0.1 §5.4 (1.0.0: 415)
        assert rest.json()["error"]["details"][0]["reason"] == "CONTENT_TYPE_NOT_SUPPORTED"
        listed = await http.post(
            "/", json={"jsonrpc": "2.0", "id": 2, "method": "ListTasks", "params": {}}, headers=V10
        )
        assert listed.json()["result"].get("totalSize", 0) == 0


async def test_grpc_answers_content_type_not_supported(agent: str) -> None:
    client = await make_client(agent, "GRPC", "1.0")
    message = Message(
        role=Role.ROLE_USER,
        message_id=uuid.uuid4().hex,
        parts=[Part(raw=b"tck", media_type=ODD)],
    )
    message.metadata.update({"skillId": "math.add"})
    try:
        # The SDK client maps the gRPC status + ErrorInfo reason back to the A2A error.
        with pytest.raises(ContentTypeNotSupportedError, match="no file input"):
            async for _ in client.send_message(SendMessageRequest(message=message)):
                pass
    finally:
        await client.close()
