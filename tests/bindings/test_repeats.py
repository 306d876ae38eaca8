"""A repeated messageId on every binding (official SDK client): each answer is typed
(never -32603 / HTTP 500 / gRPC INTERNAL) and GetTask afterwards tells one coherent story.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from typing import Any

import pytest
from a2a.client.errors import A2AClientError
from a2a.types import CancelTaskRequest, GetTaskRequest, Role
from a2a.utils.errors import A2AError, InternalError, InvalidParamsError

from tests._sdk import make_client, request

from ._outputs_agent import (
    ALL_TRANSPORTS,
    COMPLETED,
    INPUT_REQUIRED,
    send,
    text_request,
)


def _typed(outcome: Any) -> None:
    """An exception from the SDK is a typed A2A error, never an internal one."""
    if isinstance(outcome, BaseException):
        text = f"{type(outcome).__name__}: {outcome!r}"
        assert isinstance(outcome, A2AClientError | A2AError), text
        assert not isinstance(outcome, InternalError), text
        assert "Internal Server Error" not in text and "StatusCode.INTERNAL" not in text, text


@pytest.mark.parametrize(("binding", "version"), ALL_TRANSPORTS)
async def test_same_message_id_twice(agent_url: str, binding: str, version: str) -> None:
    client = await make_client(agent_url, binding, version)
    try:
        first = await send(client, request("out.trip", {"origin": "SFO"}, message_id="same-id"))
        second = await send(client, request("out.trip", {"origin": "SFO"}, message_id="same-id"))
        # One after the other: each is a message of its own (a2a-sdk keeps no messageId
        # registry); both are answered.
        assert first.status.state == second.status.state == INPUT_REQUIRED
        at_once = await asyncio.gather(
            *(
                send(client, request("out.trip", {"origin": "SFO"}, message_id="twin"))
                for _ in range(2)
            ),
            return_exceptions=True,
        )
        for outcome in at_once:
            _typed(outcome)
        # An answer reusing the id of a message the task holds: the SDK would run it and
        # keep it out of the history (it counts it saved), so it is refused, typed, and
        # the task still waits for its answer.
        reused = text_request(None, "JFK", task_id=first.id)
        reused.message.message_id = "same-id"
        # (a2a-sdk's 0.3 REST client finds no error type in the answer: an HTTP 400 to it)
        refusal: type[Exception] = InvalidParamsError
        words = "already holds message same-id"
        if (binding, version) == ("HTTP+JSON", "0.3"):
            refusal, words = A2AClientError, "HTTP Error 400"
        with pytest.raises(refusal, match=words):
            await send(client, reused)
        waiting = await client.get_task(GetTaskRequest(id=first.id))
        assert waiting.status.state == INPUT_REQUIRED
        done = await send(client, text_request(None, "JFK", task_id=first.id))
        assert done.status.state == COMPLETED
        stored = await client.get_task(GetTaskRequest(id=first.id))
        assert [m.role for m in stored.history] == [Role.ROLE_USER, Role.ROLE_AGENT, Role.ROLE_USER]
        assert stored.history[-1].parts[0].text == "JFK"
    finally:
        await client.close()


def _once_each(history: Any) -> list[str]:
    """The message ids of *history*, each checked to be there once."""
    ids = [m.message_id for m in history]
    assert len(ids) == len(set(ids)), ids
    return ids


@pytest.mark.parametrize(("binding", "version"), ALL_TRANSPORTS)
async def test_the_same_answer_twice_at_once(agent_url: str, binding: str, version: str) -> None:
    client = await make_client(agent_url, binding, version)
    try:
        for _ in range(10):
            first = await send(client, request("out.trip", {"origin": "SFO"}))
            answer = text_request(None, "JFK", task_id=first.id)
            outcomes = await asyncio.gather(
                *(send(client, answer) for _ in range(2)), return_exceptions=True
            )
            # One continues the task; its twin is refused, typed (busy, or held once the
            # first is in the history), and the history holds the answer once.
            answered = [o for o in outcomes if not isinstance(o, BaseException)]
            for outcome in outcomes:
                _typed(outcome)
            assert len(answered) == 1, outcomes
            assert answered[0].status.state == COMPLETED
            stored = await client.get_task(GetTaskRequest(id=first.id))
            assert _once_each(stored.history).count(answer.message.message_id) == 1
    finally:
        await client.close()


@pytest.mark.parametrize("streaming", [False, True], ids=["blocking", "streaming"])
@pytest.mark.parametrize(("binding", "version"), ALL_TRANSPORTS)
async def test_an_answer_racing_a_cancel_is_taken_or_refused(
    agent_url: str, binding: str, version: str, streaming: bool, caplog: pytest.LogCaptureFixture
) -> None:
    client = await make_client(agent_url, binding, version)
    answering = await make_client(agent_url, binding, version, streaming=streaming)
    try:
        # The race is lost one time in ten or so: many rounds make a loss near certain.
        for _ in range(40):
            first = await send(client, request("out.trip", {"origin": "SFO"}))
            answer = text_request(None, "JFK", task_id=first.id)
            sent, canceled = await asyncio.gather(
                send(answering, answer),
                client.cancel_task(CancelTaskRequest(id=first.id)),
                return_exceptions=True,
            )
            _typed(canceled)
            stored = await client.get_task(GetTaskRequest(id=first.id))
            taken = answer.message.message_id in _once_each(stored.history)
            if isinstance(sent, BaseException):
                _typed(sent)
                assert not taken, stored.history
            else:
                # an answer given as the task's own is in its history
                assert taken, [m.role for m in stored.history]
        # An answer refused by the run the SDK built for it (the cancel came first) left
        # that run's two queue dispatchers waiting for ever: asyncio logged each at ERROR
        # as the garbage collector destroyed it.
        with caplog.at_level(logging.ERROR, logger="asyncio"):
            gc.collect()
        destroyed = [r for r in caplog.records if "destroyed but it is pending" in r.getMessage()]
        assert destroyed == [], destroyed[0].getMessage()
    finally:
        await client.close()
        await answering.close()
