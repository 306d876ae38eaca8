"""Logs: text or one JSON object per line, task context on every record, clean client text."""

from __future__ import annotations

import ast
import asyncio
import io
import json
import logging
import re
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from apcore_a2a import _logging
from apcore_a2a._logging import JsonFormatter, TextFormatter
from apcore_a2a.settings import Settings

from .._support import CLI_STOP_TIMEOUT, ROOT, TLS, cli_server
from ._agent import TextIn, TextOut, build_registry, message_params, rpc, send, served

EXTENSIONS = Path(__file__).parent / "extensions"
#: 10 KB of client text with control characters (ESC sequences, NUL, BEL, CR/LF, DEL, C1)
NASTY = ("A\x1b[31mred\x00\x07\r\nFAKE LOG LINE\x7f\x9b\t" * 400)[:10_240]
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    """Route the root logger through a fresh handler of ours into a buffer."""
    root = logging.getLogger()
    saved_level = root.level
    stream = io.StringIO()
    yield stream
    for handler in list(root.handlers):
        if isinstance(handler, _logging._Handler):
            root.removeHandler(handler)
    root.setLevel(saved_level)


def _records(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


async def test_json_lines_carry_task_context_and_clean_truncated_client_text(
    captured: io.StringIO,
) -> None:
    _logging.configure(level="info", fmt="json", stream=captured)
    trace_id = uuid.uuid4().hex
    traceparent = f"00-{trace_id}-{uuid.uuid4().hex[:16]}-01"
    async with served() as (http, _app):
        task = await send(http, "ops.fail", {"text": NASTY}, headers={"traceparent": traceparent})
        assert task["status"]["state"] == "TASK_STATE_FAILED"
        logging.getLogger("apcore_a2a.tests").info("outside any task")
    records = _records(captured.getvalue())  # every line parses
    failure = next(r for r in records if r["msg"].startswith("Skill ops.fail failed"))
    assert failure["level"] == "WARNING"  # a module's own error code: not our fault
    assert failure["logger"] == "apcore_a2a.executor"
    assert failure["task_id"] == task["id"]
    assert failure["skill_id"] == "ops.fail"
    assert failure["trace_id"] == trace_id
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", failure["ts"])
    # truncated and clean: no control character survives, the marker says what was cut
    assert len(failure["msg"]) < 2_000
    assert "more chars]" in failure["msg"]
    assert not _CONTROL.search(failure["msg"])
    assert "FAKE LOG LINE" in failure["msg"]
    outside = next(r for r in records if r["msg"] == "outside any task")
    assert set(outside) == {"ts", "level", "logger", "msg"}


class LogsInThread:
    """A plain ``def execute`` (run on the agent's worker threads) that logs a record."""

    input_schema = TextIn
    output_schema = TextOut
    description = "Log the text"

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        logging.getLogger("tests.module").warning("module says %s", inputs["text"])
        return inputs


async def test_a_sync_modules_records_carry_its_task_context(captured: io.StringIO) -> None:
    """A record a plain ``def execute`` module logs on its worker thread names the task
    and skill, as its async neighbours' records do (before: none of the fields)."""
    _logging.configure(level="info", fmt="json", stream=captured)
    registry = build_registry()
    registry.register("ops.log", LogsInThread())
    async with served(registry) as (http, _app):
        task = await send(http, "ops.log", {"text": "hello"})
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    record = next(r for r in _records(captured.getvalue()) if r["msg"] == "module says hello")
    assert (record["task_id"], record["skill_id"]) == (task["id"], "ops.log")


#: what starts a new line (\\n; U+2028, U+2029 in some viewers and in str.splitlines) or
#: shows the rest reversed (bidi override, isolate) -> how a log line shows it
BREAKS = {"\n": "\\n", **{c: f"\\u{ord(c):04x}" for c in "\u2028\u2029\u202e\u2066"}}


@pytest.mark.parametrize("brk", list(BREAKS))
async def test_text_lines_stay_one_record_per_line(captured: io.StringIO, brk: str) -> None:
    _logging.configure(level="info", fmt="text", stream=captured)
    async with served() as (http, _app):
        task = await send(http, "ops.fail", {"text": f"first{brk}FAKE 2025 ERROR line"})
    lines = [line for line in captured.getvalue().splitlines() if "Skill ops.fail failed" in line]
    assert len(lines) == 1
    line = lines[0]
    assert " WARNING apcore_a2a.executor: Skill ops.fail failed" in line
    assert f"first{BREAKS[brk]}FAKE 2025 ERROR line" in line
    assert f"[task_id={task['id']} skill_id=ops.fail]" in line
    assert not any(row.startswith("FAKE") for row in captured.getvalue().splitlines()), (
        "client text started a line of its own"
    )


def test_formatters_survive_broken_records() -> None:
    record = logging.LogRecord(
        "apcore_a2a.x", logging.WARNING, __file__, 1, "%d items", ("x",), None
    )
    assert json.loads(JsonFormatter().format(record))["msg"] == "'%d items' ('x',)"
    assert "'%d items'" in TextFormatter().format(record)
    try:
        raise ValueError("boom\nline two")
    except ValueError:
        import sys

        failing = logging.LogRecord(
            "apcore_a2a.x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info()
        )
    as_json = json.loads(JsonFormatter().format(failing))
    assert as_json["msg"] == "failed"
    assert "ValueError: boom" in as_json["exc"]
    long = logging.LogRecord("apcore_a2a.x", logging.INFO, __file__, 1, "y" * 50_000, (), None)
    assert len(json.loads(JsonFormatter().format(long))["msg"]) < _logging.MAX_MESSAGE + 100


def test_bound_fields_are_scoped() -> None:
    assert _logging.current_fields() == {}
    outer = _logging.bind(task_id="t1", skill_id="s", trace_id=None)
    inner = _logging.bind(task_id="t2")
    assert _logging.current_fields() == {"task_id": "t2", "skill_id": "s"}
    _logging.unbind(inner)
    assert _logging.current_fields() == {"task_id": "t1", "skill_id": "s"}
    _logging.unbind(outer)
    assert _logging.current_fields() == {}


def test_settings_choose_the_format(captured: io.StringIO) -> None:
    settings = Settings.resolve(environ={"A2A_LOG_FORMAT": "json", "A2A_LOG_LEVEL": "warning"})
    _logging.configure(settings, stream=captured)
    logging.getLogger("apcore_a2a.tests").info("hidden")
    logging.getLogger("apcore_a2a.tests").warning("shown")
    assert [r["msg"] for r in _records(captured.getvalue())] == ["shown"]


def test_configure_leaves_foreign_handlers_alone_unless_forced(captured: io.StringIO) -> None:
    root = logging.getLogger()
    foreign = logging.NullHandler()
    root.addHandler(foreign)
    try:
        assert _logging.configure(fmt="json", stream=captured, force=False) is False
        assert not any(isinstance(h, _logging._Handler) for h in root.handlers)
        assert _logging.configure(fmt="json", stream=captured) is True
        assert _logging.configure(fmt="text", stream=captured) is True
        assert sum(isinstance(h, _logging._Handler) for h in root.handlers) == 1
        assert foreign in root.handlers
    finally:
        root.removeHandler(foreign)


def test_cli_json_logs_parse_line_by_line() -> None:
    args = ["--extensions-dir", str(EXTENSIONS), "--log-format", "json", "--metrics", "--telemetry"]
    # the environment says text; the flag wins once the settings are resolved
    with cli_server(args, env={"A2A_LOG_FORMAT": "text"}) as (url, proc):

        async def call() -> dict[str, Any]:
            async with httpx.AsyncClient(base_url=url, verify=TLS) as http:
                return await rpc(http, "SendMessage", message_params("noisy.fail", {"text": NASTY}))

        reply = asyncio.run(call())
        task_id = reply["result"]["task"]["id"]
        # --metrics and --telemetry take effect too (no tracer provider: spans are no-ops)
        metrics = httpx.get(url + "/metrics", verify=TLS).json()
        assert metrics["failed_tasks"] == 1
        assert metrics["total_requests"] == 1
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=CLI_STOP_TIMEOUT) == 0, proc.output()
        out = proc.output()
    # the CLI's one-line banner is printed, not logged; everything else is JSON
    lines = [line for line in out.splitlines() if not line.startswith("apcore-a2a ")]
    records = [json.loads(line) for line in lines]
    assert {r["logger"] for r in records} >= {"apcore_a2a", "uvicorn.error"}
    failure = next(r for r in records if r.get("task_id") == task_id)
    assert failure["skill_id"] == "noisy.fail"
    assert not _CONTROL.search(failure["msg"])
    assert len(failure["msg"]) < 2_000


def test_every_package_logger_is_under_apcore_a2a() -> None:
    names: list[str] = []
    for path in (ROOT / "apcore_a2a").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
                continue
            func = node.value.func
            if not (isinstance(func, ast.Attribute) and func.attr == "getLogger"):
                continue
            if not node.value.args:
                continue  # the root logger, configured (not logged to) by _logging
            arg = node.value.args[0]
            if isinstance(arg, ast.Name) and arg.id == "__name__":
                continue  # modules of the package: apcore_a2a.*
            assert isinstance(arg, ast.Constant), f"{path}: logger name is not a literal"
            names.append(str(arg.value))
    assert names, "found no loggers at all"
    strays = [n for n in names if n != "apcore_a2a" and not n.startswith("apcore_a2a.")]
    assert strays == []


def test_a_traceback_carrying_client_text_stays_one_bounded_line() -> None:
    # A module raising a plain exception with the client's text in it is logged at ERROR
    # with its traceback (execution/executor.py): the text must not start a line of its
    # own in the text format, and a megabyte of it must not reach the log.
    try:
        forged = "x\r\n2025-01-01 12:00:00,000 ERROR forged: line"
        raise ValueError(f"bad input {forged}" + "y" * 1_000_000)
    except ValueError:
        import sys

        failing = logging.LogRecord(
            "apcore_a2a.executor", logging.ERROR, __file__, 1, "Skill failed", (), sys.exc_info()
        )
    text = TextFormatter().format(failing)
    assert len(text.splitlines()) == 1, text[:300]
    assert "ValueError: bad input x" in text and "forged: line" in text
    assert len(text) < _logging.MAX_TRACEBACK + 200
    exc = json.loads(JsonFormatter().format(failing))["exc"]
    assert exc.startswith("Traceback") and "ValueError: bad input x" in exc
    assert len(exc) < _logging.MAX_TRACEBACK + 200


@pytest.mark.parametrize("brk", list(BREAKS))
async def test_client_text_is_one_line_under_the_applications_own_formatter(
    caplog: pytest.LogCaptureFixture, brk: str
) -> None:
    # An application that configures logging itself keeps its formatter (serve() leaves
    # it alone): the client text the agent puts into a message must be one line already.
    caplog.set_level(logging.INFO, logger="apcore_a2a")
    async with served() as (http, _app):
        task = await send(http, "ops.fail", {"text": f"first{brk}FAKE 2025 ERROR line"})
        assert task["status"]["state"] == "TASK_STATE_FAILED"
    (record,) = [r for r in caplog.records if r.getMessage().startswith("Skill ops.fail failed")]
    assert f"first{BREAKS[brk]}FAKE 2025 ERROR line" in record.getMessage()
    assert len(logging.Formatter().format(record).splitlines()) == 1


#: control characters a caller may send (ESC of an ANSI sequence, NUL, BEL, CR, DEL, C1
#: CSI) -> how every log line shows them: visibly, as an echoed value is written back
CONTROLS = {c: f"\\x{ord(c):02x}" for c in "\x1b\x00\x07\r\x7f\x9b"}


@pytest.mark.parametrize("fmt", ["text", "json", "own"])
async def test_control_characters_are_shown_not_dropped(
    captured: io.StringIO, caplog: pytest.LogCaptureFixture, fmt: str
) -> None:
    # A reader must tell "a\x1b[2Jb" from "ab": the caller's value is logged as it was
    # sent, each control character escaped (as an error's echoed value is), and none raw.
    if fmt == "own":
        caplog.set_level(logging.INFO, logger="apcore_a2a")
    else:
        _logging.configure(level="info", fmt=fmt, stream=captured)
    sent = "a" + "".join(f"{c}[2J" for c in CONTROLS) + "b"
    shown = "a" + "".join(f"{e}[2J" for e in CONTROLS.values()) + "b"
    async with served() as (http, _app):
        task = await send(http, "ops.fail", {"text": sent})
        assert task["status"]["state"] == "TASK_STATE_FAILED"
    if fmt == "own":
        (record,) = [r for r in caplog.records if "Skill ops.fail failed" in r.getMessage()]
        lines = [logging.Formatter().format(record)]
    else:
        lines = [line for line in captured.getvalue().splitlines() if "ops.fail failed" in line]
        assert len(lines) == 1, lines
        if fmt == "json":
            lines = [json.loads(lines[0])["msg"]]
    assert f"cannot handle {shown}" in lines[0], lines[0]
    assert not _CONTROL.search(lines[0])
