"""0.3 push bodies of a stream whose chunks live in the event log (SQL stores): the
stored artifact has no parts (``storage/streamed.in_log``); the body shows this event's
chunk in its place."""

from __future__ import annotations

import json

from a2a.types import Artifact, Part, Task, TaskArtifactUpdateEvent, TaskState

from apcore_a2a.push.bodies import body_v03


def _task() -> Task:
    task = Task(id="t1", context_id="c1")
    task.status.state = TaskState.TASK_STATE_WORKING
    done = task.artifacts.add(artifact_id="done")
    done.parts.append(Part(text="whole"))
    task.artifacts.add(artifact_id="stream")  # its parts are its events
    return task


def test_a_0_3_body_carries_the_chunk_of_its_event() -> None:
    chunk = Artifact(artifact_id="stream", parts=[Part(text="chunk 7")])
    event = TaskArtifactUpdateEvent(task_id="t1", context_id="c1", artifact=chunk, append=True)
    task = _task()

    body = json.loads(body_v03(event, task))

    texts = {a["artifactId"]: [p["text"] for p in a["parts"]] for a in body["artifacts"]}
    assert texts == {"done": ["whole"], "stream": ["chunk 7"]}
    assert not task.artifacts[1].parts  # the SDK's task in memory is left as it is


def test_a_status_event_mid_stream_leaves_the_streamed_artifact_out() -> None:
    from a2a.types import TaskStatusUpdateEvent

    event = TaskStatusUpdateEvent(task_id="t1", context_id="c1")
    event.status.state = TaskState.TASK_STATE_WORKING

    body = json.loads(body_v03(event, _task()))

    assert [a["artifactId"] for a in body["artifacts"]] == ["done"]
