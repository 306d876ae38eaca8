"""Our own tables, beside the SDK's ``tasks`` / ``push_notification_configs`` / cluster tables.

Only cluster mode uses them: a replica registry (heartbeats) and task claims (which
replica last started running a task), so a replica can tell tasks of a dead process from
tasks another live replica is still working on; and turn claims (which message continues
a parked task, see ``turns.py``).
"""

from __future__ import annotations

from sqlalchemy import Column, Float, Index, Integer, MetaData, String, Table

__all__ = ["METADATA", "claims_table", "replicas_table", "turns_table"]

METADATA = MetaData()

replicas_table = Table(
    "apcore_a2a_replicas",
    METADATA,
    Column("replica_id", String(64), primary_key=True),
    Column("hostname", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("started_at", Float, nullable=False),
    # Wall-clock seconds since the epoch; replicas must share a clock within a few
    # seconds (NTP), which is far below the liveness timeout.
    Column("heartbeat_at", Float, nullable=False),
)

claims_table = Table(
    "apcore_a2a_task_claims",
    METADATA,
    Column("task_id", String(36), primary_key=True),
    Column("owner", String(255), nullable=True),
    Column("replica_id", String(64), nullable=False),
    Index("ix_apcore_a2a_task_claims_replica", "replica_id"),
)

turns_table = Table(
    "apcore_a2a_task_turns",
    METADATA,
    Column("task_id", String(255), primary_key=True),
    Column("turn", String(64), primary_key=True),
)
