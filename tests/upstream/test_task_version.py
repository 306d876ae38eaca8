"""Watch: a2a-sdk's ``TaskVersion`` offers no accessor for the number it wraps.

``apcore_a2a.upstream.sql_task_rows.version_number`` reads it. The first test fails the day
``TaskVersion`` gains a public member (an accessor, say ``value``): use it and delete
``version_number``. The second holds the correction to what the SDK stores.
"""

from __future__ import annotations

from a2a.server.cluster import TaskVersion

from apcore_a2a.upstream.sql_task_rows import version_number


def test_task_version_still_has_no_accessor() -> None:
    public = sorted(name for name in dir(TaskVersion) if not name.startswith("_"))
    assert public == ["MISSING", "is_after", "is_missing"]


def test_the_number_is_the_one_wrapped() -> None:
    assert version_number(TaskVersion(7)) == 7
    assert TaskVersion(8).is_after(TaskVersion(7))
