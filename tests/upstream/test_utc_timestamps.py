"""Tripwire of ``upstream/utc_timestamps.py``: a2a-sdk 1.3's client parsers refuse a task
status timestamp without a zone designator (pydantic fasta2a 2.1.1 writes them).

The day the SDK reads one itself, ``test_the_sdk_refuses_a_timestamp_without_a_zone`` fails
and the correction can go.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from a2a.compat.v0_3 import conversions
from a2a.compat.v0_3 import types as types_v03
from a2a.types import a2a_pb2 as pb
from a2a.utils.proto_utils import parse_lenient
from google.protobuf.json_format import ParseError

from apcore_a2a.upstream.utc_timestamps import utc_timestamps

STAMP = "2026-12-02T00:45:27.232760"  # fasta2a: datetime.now().isoformat()


def _task(stamp: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": "t-1",
        "contextId": "c-1",
        "status": {"state": "TASK_STATE_WORKING", "timestamp": stamp},
    } | extra


def _as_sdk_1_0(answer: dict[str, Any]) -> pb.SendMessageResponse:
    return parse_lenient(answer, pb.SendMessageResponse())


def _as_sdk_0_3(task: dict[str, Any]) -> pb.Task:
    legacy = task | {"kind": "task", "status": {**task["status"], "state": "working"}}
    return conversions.to_core_task(types_v03.Task.model_validate(legacy))


def test_the_sdk_refuses_a_timestamp_without_a_zone() -> None:
    with pytest.raises(ParseError, match="timestamp"):
        _as_sdk_1_0({"task": _task(STAMP)})
    with pytest.raises(ValueError):
        _as_sdk_0_3(_task(STAMP))


def test_corrected_it_reads_as_that_time_in_utc() -> None:
    answer = utc_timestamps({"jsonrpc": "2.0", "id": 1, "result": {"task": _task(STAMP)}})
    parsed = _as_sdk_1_0(answer["result"])
    assert parsed.task.status.timestamp.ToJsonString() == STAMP + "Z"
    legacy = _as_sdk_0_3(utc_timestamps(_task(STAMP)))
    assert legacy.status.timestamp.ToJsonString() == STAMP + "Z"


@pytest.mark.parametrize(
    "answer",
    [
        {
            "statusUpdate": {
                "taskId": "t-1",
                "status": {"state": "TASK_STATE_WORKING", "timestamp": STAMP},
            }
        },
        {"tasks": [_task(STAMP), _task(STAMP + "Z")], "nextPageToken": ""},
        _task("2026-12-02T00:45:27"),
    ],
    ids=["status-update", "task-list", "whole-seconds"],
)
def test_every_status_is_read(answer: dict[str, Any]) -> None:
    fixed = utc_timestamps(answer)
    stamps = [
        t["status"]["timestamp"] for t in fixed.get("tasks") or [fixed.get("statusUpdate", fixed)]
    ]
    assert all(s.endswith("Z") for s in stamps), stamps


def test_what_is_not_a_zone_less_status_timestamp_is_left_alone() -> None:
    lookalike = {"status": {"timestamp": STAMP}}  # the application's data, not a status
    task = _task(
        "2026-12-02T00:45:27+02:00",
        metadata=lookalike,
        artifacts=[{"artifactId": "a", "parts": [{"data": lookalike}]}],
        history=[{"messageId": "m", "metadata": lookalike, "parts": []}],
    )
    answer = {"jsonrpc": "2.0", "id": 1, "result": {"task": task}}
    assert utc_timestamps(answer) is answer  # nothing to correct: not even copied
    garbage = _task("yesterday")
    assert utc_timestamps(garbage) is garbage  # for the SDK to refuse


def test_the_answers_text_spares_the_walk_only_when_it_holds_no_such_timestamp() -> None:
    naive = {"task": _task(STAMP)}
    text = json.dumps(naive).encode()
    assert utc_timestamps(naive, text)["task"]["status"]["timestamp"] == STAMP + "Z"
    zoned = {"task": _task(STAMP + "Z")}
    assert utc_timestamps(zoned, json.dumps(zoned).encode()) is zoned
