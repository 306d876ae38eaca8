"""A refusal echoes the caller's value, slashes and all, while our own file paths in an
error's text still never reach the wire (``streams/scrub.py``, ``adapters/errors.sanitize``).

The scrubber took every run of two slash-separated words for a server path: a 0.3 gRPC
name ``tasks/t/pushNotificationConfigs/c`` came back as ``'tasks<path>'``.
"""

from __future__ import annotations

from typing import Any

import grpc
import grpc.aio
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb03
from apcore import Executor, Registry
from apcore.errors import InvalidInputError

from apcore_a2a import A2AServerFactory
from tests._sdk import make_client, request
from tests._support import free_port, running_server
from tests.bindings._grpc import stubs

#: our paths, absolute and relative to the package, as an exception's text may carry them
LEAK = "bad input near /srv/app/secret/config.py line 3 (apcore_a2a/storage/_sql_backend.py)"


class Leaky:
    description = "Refuse its input, naming where"

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        raise InvalidInputError(LEAK)


def _agent() -> tuple[Any, int, int]:
    registry = Registry()
    registry.register("t.leaky", Leaky())
    port, grpc_port = free_port(), free_port()
    app, _ = A2AServerFactory(
        Executor(registry), environ={}, port=port, grpc_port=grpc_port
    ).create()
    return app, port, grpc_port


async def test_a_03_grpc_refusal_echoes_the_callers_name_whole() -> None:
    app, port, grpc_port = _agent()
    name = "tasks/t/pushNotificationConfigs/c"
    async with running_server(app, port=port), stubs(f"127.0.0.1:{grpc_port}") as (_, v03):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await v03.CancelTask(pb03.CancelTaskRequest(name=name))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.value.details() == (
        f"InvalidParamsError: name must be tasks/{{taskId}}, not '{name}'"
    )


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON", "GRPC"])
async def test_our_paths_in_an_errors_text_never_reach_the_wire(binding: str) -> None:
    app, port, _ = _agent()
    async with running_server(app, port=port):
        client = await make_client(f"http://127.0.0.1:{port}", binding, "1.0")
        try:
            with pytest.raises(Exception) as refused:
                async for _ in client.send_message(request("t.leaky", {})):
                    pass
        finally:
            await client.close()
    text = f"{refused.value} {refused.value.__cause__}"
    assert "bad input near <path>" in text, text
    for leak in ("/srv", "secret", "config.py", "_sql_backend", "storage"):
        assert leak not in text, text
