"""``ApCoreAgentExecutor`` is public: an application may hand it to a request handler of
its own. It runs only the request contexts apcore-a2a's builder routed, since they carry
the call's record (whose caller key the sync threads are shared by); any other context is
the application's wiring error, an internal one, and no caller key is made up for it (all
such calls once shared ``ip:unknown``).
"""

from __future__ import annotations

import pytest
from a2a.server.agent_execution import RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue_v2 import EventQueueSource
from a2a.utils.errors import InternalError
from apcore import Executor, Registry

from apcore_a2a import ApCoreAgentExecutor, Settings
from tests._sdk import request


async def test_a_context_the_agent_did_not_route_is_an_internal_error() -> None:
    executor = ApCoreAgentExecutor(Executor(Registry()), Settings())
    # The SDK's own builder's context: no skill resolved, no call recorded.
    context = RequestContext(ServerCallContext(), request("any.skill", {"a": 1}))
    queue = EventQueueSource()
    with pytest.raises(InternalError, match="ApCoreRequestContextBuilder"):
        await executor.execute(context, queue)
    await queue.close(immediate=True)
    executor.close()
