"""One tap on the answer: what an A2A call answered, observed once, as the SDK's objects.

Every binding and version reaches the one request handler, which hands back protobuf
objects (a ``Task``, a stream's events, a push config) or raises. Its methods, wrapped in
:func:`answering` / :func:`answering_stream`, note each on the call's :class:`Answer`, and
whoever needs the answer reads it there: the error answers, SSE ids and cancel-on-drop
(``streams/answers.py``), the request span (``ops/telemetry.py``). Nothing reads the SDK's
rendered bytes back. An HTTP call's answer is made once (:meth:`Answer.of`) on its request
record (``classify.RequestInfo``) and reaches the handler on the call record
(``edge/call.py``); a gRPC call's is made by the interceptor (``server/grpc.py``).
"""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, Callable, Coroutine, MutableMapping
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypeVar

from a2a.server.context import ServerCallContext
from a2a.types import Task, TaskState, TaskStatusUpdateEvent

from apcore_a2a.classify import request_info
from apcore_a2a.edge.call import call_of

#: ``TaskState.Name`` of each state A2A defines, read once (it builds a mapping per call)
_STATE_NAMES = {number: name for name, number in TaskState.items()}

P = ParamSpec("P")
R = TypeVar("R")
H = TypeVar("H")


@dataclass(slots=True)
class Answer:
    """What one call answered so far (see the module docstring)."""

    task_id: str | None = None
    context_id: str | None = None
    #: the last task state it carried (``TASK_STATE_COMPLETED``...)
    state: str | None = None
    #: whether the request reached the handler (else the route refused it itself)
    reached: bool = False
    #: what the handler raised
    failure: Exception | None = None
    #: the error code answered (JSON-RPC code, REST status), for the request span
    error_type: str | None = None
    #: the SSE id of the stream event being sent now (resumable streams)
    sse_id: str | None = None
    #: the id a resuming client sent (``Last-Event-ID``)
    last_event_id: str | None = None
    #: the stream's client hung up before its answer started (the request guard saw it)
    hung_up: bool = False
    #: a stop ended its stream (``ops/stream_ends.py``, ``CallEnds``): its client did not
    #: drop it, and ``cancel_on_disconnect`` leaves its task (parked, it outlives the stop)
    stopped: bool = False
    #: the task the call's run goes by, known before anything is answered (noted with the
    #: call record's, ``execution/routing.py``); the answer holds no link to that record,
    #: which holds the answer: a cycle kept each call's objects for the cyclic collector
    run_task: str | None = None

    @classmethod
    def of(cls, scope: MutableMapping[str, Any]) -> Answer:
        """The answer of the A2A request *scope* belongs to (made on first use)."""
        info = request_info(scope)
        if info is None:
            return cls()
        if not isinstance(info.answer, Answer):
            info.answer = cls()
        return info.answer

    def saw(self, answered: Any) -> None:
        """Note the task a task, message, event or push config is about."""
        is_task = isinstance(answered, Task)
        task_id = answered.id if is_task else getattr(answered, "task_id", None)
        if task_id is None:
            return
        self.task_id = task_id or self.task_id
        self.context_id = getattr(answered, "context_id", "") or self.context_id
        if is_task or isinstance(answered, TaskStatusUpdateEvent):
            state = answered.status.state
            self.state = _STATE_NAMES.get(state) or TaskState.Name(state)


def answer_of(context: ServerCallContext | None) -> Answer | None:
    """The answer of the call *context* belongs to (``None``: a call the edge did not see)."""
    call = call_of(context)
    found = call.answer if call is not None else None
    return found if isinstance(found, Answer) else None


def _answer_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Answer | None:
    answer = answer_of(kwargs.get("context", args[1] if len(args) > 1 else None))
    if answer is not None:
        answer.reached = True
    return answer


def answering(
    method: Callable[Concatenate[H, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[H, P], Coroutine[Any, Any, R]]:
    """A handler method ``(params, context)`` noting its result or error on the answer."""

    @functools.wraps(method)
    async def observed(self: H, /, *args: P.args, **kwargs: P.kwargs) -> R:
        answer = _answer_of(args, kwargs)
        try:
            result = await method(self, *args, **kwargs)
        except Exception as exc:
            if answer is not None:
                answer.failure = exc
            raise
        if answer is not None:
            answer.saw(result)
        return result

    return observed


def answering_stream(
    method: Callable[Concatenate[H, P], AsyncGenerator[R, None]],
) -> Callable[Concatenate[H, P], AsyncGenerator[R, None]]:
    """A streaming handler method noting each event, or its error, on the answer."""

    @functools.wraps(method)
    async def observed(self: H, /, *args: P.args, **kwargs: P.kwargs) -> AsyncGenerator[R, None]:
        answer = _answer_of(args, kwargs)
        events = method(self, *args, **kwargs)
        try:
            async for event in events:
                if answer is not None:
                    answer.saw(event)
                yield event
        except Exception as exc:
            if answer is not None:
                answer.failure = exc
            raise
        finally:
            await events.aclose()

    return observed
