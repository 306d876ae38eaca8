"""0.3 push bodies of a stream whose chunks live in the event log (cluster mode)."""

from __future__ import annotations

import json

from a2a.types import Artifact, Part, Task, TaskArtifactUpdateEvent, TaskState

from apcore_a2a.push.bodies import body_v03
from apcore_a2a.storage.streamed import IN_LOG


def _task() -> Task:
    task = Task(id="t1", context_id="c1")
    task.status.state = TaskState.TASK_STATE_WORKING
    done = task.artifacts.add(artifact_id="done")
    done.parts.append(Part(text="whole"))
    streamed = task.artifacts.add(artifact_id="stream")
    streamed.metadata[IN_LOG] = True
    return task


def test_a_0_3_body_never_carries_the_event_log_mark() -> None:
    chunk = Artifact(artifact_id="stream", parts=[Part(text="chunk 7")])
    event = TaskArtifactUpdateEvent(task_id="t1", context_id="c1", artifact=chunk, append=True)
    task = _task()

    body = json.loads(body_v03(event, task))

    assert IN_LOG not in json.dumps(body)
    texts = {a["artifactId"]: [p["text"] for p in a["parts"]] for a in body["artifacts"]}
    assert texts == {"done": ["whole"], "stream": ["chunk 7"]}
    assert IN_LOG in task.artifacts[1].metadata  # the SDK's task in memory is left as it is


def test_a_status_event_mid_stream_leaves_the_marked_artifact_out() -> None:
    from a2a.types import TaskStatusUpdateEvent

    event = TaskStatusUpdateEvent(task_id="t1", context_id="c1")
    event.status.state = TaskState.TASK_STATE_WORKING

    body = json.loads(body_v03(event, _task()))

    assert [a["artifactId"] for a in body["artifacts"]] == ["done"]
    assert IN_LOG not in json.dumps(body)
