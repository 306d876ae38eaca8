"""a2a-sdk's client transports' failures as the client's typed errors, which leave alone.

A gRPC status is read for what the agent said (its ErrorInfo reason, a 0.3 error's name,
the status code); what the SDK could not read (a result it refuses, a reply that is no A2A
answer) is :class:`InvalidAgentResponseError`, a failed connection or timeout
:class:`A2AConnectionError`. No typed error is raised from the SDK's: that one, and the
protobuf, pydantic or gRPC error behind it, keeps the agent's whole answer (a pydantic
error its input values, a protobuf one the value it names: 31 MiB printed for a 10 MiB
answer); the typed error says the type and first words of the SDK's error instead.

A client error leaves alone: nothing behind it keeps what the agent answered. An exception
keeps alive whatever is behind it: the exceptions it was raised from or while handling
(``__cause__``, ``__context__``), and through its traceback every frame it left with the
values they held. Both hold the agent's answer when a call fails: the SDK's error (kept by
``contextlib``'s ``__exit__`` frame even when nothing is chained) and the protobuf or
pydantic error behind it, the body the client read (up to ``MAX_ANSWER_BYTES``). Measured,
an error raised for a 10 MiB answer kept 40 MiB alive for as long as a caller held it (a
list of failures, a log record). Its own message is bounded (``errors.MAX_MESSAGE_CHARS``);
the rest is dropped where the error leaves the client: a public method
(:func:`leaves_alone`) or a stream's iterator (:func:`alone_after_events`).
"""

from __future__ import annotations

import contextlib
import functools
import re
import sys
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from typing import Any, ParamSpec, TypeVar

import httpx
from a2a.client.errors import A2AClientTimeoutError
from a2a.utils.errors import A2AError as SDKError
from google.protobuf.json_format import MessageToDict, ParseError
from google.protobuf.message import DecodeError

from apcore_a2a._text import message_line
from apcore_a2a.client._bounded import too_large
from apcore_a2a.client.errors import (
    A2AAuthenticationError,
    A2AClientError,
    A2AConnectionError,
    A2AServerError,
    InvalidAgentResponseError,
    InvalidRequestError,
    UnsupportedOperationError,
    error_from_details,
)

P = ParamSpec("P")
R = TypeVar("R")

#: gRPC's words for a request past the receive limit of the agent's server
_REQUEST_TOO_LARGE = re.compile(r"^SERVER: Received message larger than max \((\d+) vs\. (\d+)\)")
#: what a typed error says of the SDK's error behind it: its first words, in one line
_SAID_CHARS = 300


def _grpc_details(error: Any) -> list[dict[str, Any]]:
    """The readable details of *error*'s ``google.rpc.Status``: none when the agent's status
    is no ``Status`` or contradicts the call's own code and message, and not one of a type
    no one registered or that is corrupt (the call's code and message still say what failed).
    """
    from a2a.utils.grpc_status import status_from_call
    from google.rpc import error_details_pb2  # noqa: F401  (registers ErrorInfo for MessageToDict)

    try:
        status = status_from_call(error)
    except (DecodeError, ValueError):
        return []
    details = []
    for detail in status.details if status is not None else ():
        with contextlib.suppress(DecodeError, TypeError, ValueError):
            details.append(MessageToDict(detail))
    return details


def _grpc_error(error: Any, method: str, url: str) -> A2AClientError:
    details = _grpc_details(error)
    message, code = str(error.details() or ""), error.code().name
    name, _, text = message.partition(": ")  # 0.3 answers "TaskNotFoundError: Task not found"
    typed = error_from_details({"message": message, "details": details}) or error_from_details(
        {"message": text}, name
    )
    if typed is not None:
        return typed
    if code == "RESOURCE_EXHAUSTED" and "CLIENT: Received message larger than max" in message:
        return too_large(f"an answer of {url}")  # gRPC's words for the limit the client set
    if code == "RESOURCE_EXHAUSTED" and (sizes := _REQUEST_TOO_LARGE.search(message)):
        # the agent's gRPC refused the request past its receive limit, before any A2A code
        # read it: over HTTP the same request is -32600 "Payload too large" (413)
        got, most = sizes.groups()
        return InvalidRequestError(
            f"Payload too large: the agent takes at most {most} bytes, the request has {got}"
        )
    if code in ("UNAUTHENTICATED", "PERMISSION_DENIED"):
        return A2AAuthenticationError(f"gRPC {code} from {url}: {message}")
    if code == "UNAVAILABLE":
        return A2AConnectionError(f"{method} to {url} failed: {message}")
    return A2AServerError(f"gRPC {code} from {url}: {message}", data=details or None)


def _from_grpc(exc: BaseException, method: str, url: str) -> A2AClientError | None:
    """The typed error of the failed gRPC call behind *exc* (an SDK error raised from it, or
    what the SDK raised while reading its error details); ``None`` for another failure."""
    grpc = sys.modules.get("grpc.aio")
    for behind in (exc.__cause__, exc.__context__):
        if grpc is not None and isinstance(behind, grpc.AioRpcError):
            return _grpc_error(behind, method, url)
    return None


def _said(exc: BaseException) -> str:
    """*exc*'s type and the start of its message, in one line (pydantic's runs to several)."""
    return f"{type(exc).__name__}: {message_line(str(exc)[: _SAID_CHARS * 2])}"[:_SAID_CHARS]


@contextlib.contextmanager
def translated(method: str, url: str) -> Iterator[None]:
    """SDK transport failures → the client's typed errors (ours pass through), none raised
    from the SDK's (see the module docstring)."""
    try:
        yield
    except A2AClientError:
        raise
    except (A2AClientTimeoutError, TimeoutError):  # TimeoutError: the whole call's
        raise A2AConnectionError(f"{method} to {url} timed out") from None
    except NotImplementedError as exc:  # what the SDK's 0.3 transports do not offer
        raise UnsupportedOperationError(f"{method} over this binding: {exc}") from None
    except SDKError as exc:
        typed = _from_grpc(exc, method, url)
        if typed is None and isinstance(exc.__cause__, httpx.TransportError):
            typed = A2AConnectionError(f"{method} to {url} failed: {exc.__cause__}")
        raise typed or InvalidAgentResponseError(
            f"agent returned an invalid reply ({_said(exc)})"
        ) from None
    except (
        ValueError,
        TypeError,
        KeyError,
        AttributeError,
        ParseError,
        RecursionError,
        DecodeError,
    ) as exc:
        typed = _from_grpc(exc, method, url)  # the SDK could not read the agent's error
        raise typed or InvalidAgentResponseError(
            f"agent returned an invalid {method} result ({_said(exc)})"
        ) from None


@contextlib.contextmanager
def alone() -> Iterator[None]:
    """Let a typed error raised inside leave with nothing chained to it and the frames it
    left (all finished: only their values go) holding nothing; its traceback still says
    where it was raised."""
    try:
        yield
    except A2AClientError as error:
        error.__cause__ = error.__context__ = None
        # The frames below this one are done (the error left them): clearing drops their
        # values only. The running ones, this and its callers', are skipped by clear_frames.
        traceback.clear_frames(error.__traceback__)
        raise


def leaves_alone(method: Callable[P, Awaitable[R]]) -> Callable[P, Coroutine[Any, Any, R]]:
    """*method* (a coroutine function) in :func:`alone`, its own frame included: what it
    read of the answer before refusing it (a task of no id, a push status that is none)."""

    @functools.wraps(method)
    async def alone_after(*args: P.args, **kwargs: P.kwargs) -> R:
        with alone():
            return await method(*args, **kwargs)

    return alone_after


async def alone_after_events(events: AsyncIterator[R]) -> AsyncIterator[R]:
    """*events* (a stream's iterator, closed with this one) in :func:`alone`, the frames
    of the iterator that read them included (the event it refused)."""
    with alone():
        async with contextlib.aclosing(events):  # type: ignore[type-var]
            async for event in events:
                yield event
