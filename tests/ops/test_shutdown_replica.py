"""A task another replica canceled while this one still ran it: the drain that follows
neither waits out shutdown_timeout for a save the store refuses nor calls it unstored."""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import pytest

from ._agent import build_registry, rpc, served, wait_state
from .test_shutdown import _released_once_draining, _start_gated


async def test_a_task_canceled_by_another_replica_gets_no_unstored_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="apcore_a2a.ops.shutdown")
    with tempfile.TemporaryDirectory() as folder:
        store = f"sqlite:///{Path(folder) / 'tasks.db'}"
        gate = Path(folder) / "release"
        replica = {"task_store": store, "cluster": True}
        async with (
            served(build_registry(gated=True), **replica) as (other, _),
            served(build_registry(gated=True), **replica, shutdown_timeout=30) as (http, app),
        ):
            [task_id] = await _start_gated(http, gate, 1)
            reply = await rpc(other, "CancelTask", {"id": task_id})
            assert "result" in reply, reply
            await wait_state(other, task_id, {"TASK_STATE_CANCELED"})
            releaser = _released_once_draining(app, gate)  # completed during the drain
        # `served` stops this replica first; before, its stop outlasted the harness's 30 s.
        assert releaser.done()
    assert "is not stored" not in caplog.text, caplog.text
