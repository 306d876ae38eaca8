"""OpenTelemetry: request span -> module span, inbound traceparent, the SDK's own spans.

Spans are read back with the OpenTelemetry SDK's in-memory exporter on the global
tracer provider (the provider an application would configure).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.utils.telemetry import trace_function
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from apcore_a2a import A2AServerFactory
from apcore_a2a.ops import telemetry
from tests._support import TLS, running_server
from tests.upstream._plain import plain_agent

from ._agent import (
    V1,
    TextIn,
    TextOut,
    build_registry,
    message_params,
    rpc,
    send,
    served,
    wait_state,
)

_EXPORTER = InMemorySpanExporter()
#: the instrumentation scope of the a2a-sdk's own spans
SDK_SCOPE = "a2a-python-sdk"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    if not getattr(provider, "_apcore_a2a_test_exporter", False):
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        provider._apcore_a2a_test_exporter = True  # type: ignore[attr-defined]
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()


def _traceparent() -> tuple[str, int, int]:
    trace_id, span_id = uuid.uuid4().hex, uuid.uuid4().hex[:16]
    return f"00-{trace_id}-{span_id}-01", int(trace_id, 16), int(span_id, 16)


def _in_trace(exporter: InMemorySpanExporter, trace_id: int) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.context.trace_id == trace_id]


def _ancestors(span: ReadableSpan, spans: list[ReadableSpan]) -> list[ReadableSpan]:
    by_id = {s.context.span_id: s for s in spans}
    chain = []
    parent = span.parent
    while parent is not None and parent.span_id in by_id:
        chain.append(by_id[parent.span_id])
        parent = chain[-1].parent
    return chain


async def _module_span(
    exporter: InMemorySpanExporter, trace_id: int, skill: str
) -> tuple[ReadableSpan, list[ReadableSpan]]:
    async with asyncio.timeout(10):
        while True:
            spans = _in_trace(exporter, trace_id)
            found = [s for s in spans if s.name == f"execute {skill}"]
            if found:
                assert len(found) == 1
                return found[0], spans
            await asyncio.sleep(0.02)


def _request_span(module: ReadableSpan, spans: list[ReadableSpan]) -> ReadableSpan:
    servers = [s for s in _ancestors(module, spans) if s.kind == SpanKind.SERVER]
    assert servers, "the module span has no request span above it"
    return servers[-1]


async def test_module_span_is_a_child_of_the_request_in_the_inbound_trace(
    spans: InMemorySpanExporter,
) -> None:
    header, trace_id, remote_parent = _traceparent()
    async with served(telemetry=True) as (http, _app):
        task = await send(http, "ops.add", {"a": 2, "b": 3}, headers={"traceparent": header})
        module, in_trace = await _module_span(spans, trace_id, "ops.add")
    request = _request_span(module, in_trace)
    assert request.parent is not None and request.parent.span_id == remote_parent
    assert request.parent.is_remote
    assert request.name == "SendMessage"
    assert module.attributes is not None
    assert dict(module.attributes) == {
        "a2a.task.id": task["id"],
        "gen_ai.conversation.id": task["contextId"],
        "apcore.module.id": "ops.add",
        "a2a.method.name": "SendMessage",
        "a2a.task.state": "TASK_STATE_COMPLETED",
    }
    assert module.kind == SpanKind.INTERNAL
    assert module.status.status_code != StatusCode.ERROR
    # one trace per request: every other span of ours hangs below the request span (the
    # SDK's own spans are its business: some still open when this reads the trace)
    for span in in_trace:
        if span is not request and span.instrumentation_scope.name != SDK_SCOPE:
            assert request in _ancestors(span, in_trace), span.name


async def test_without_traceparent_each_request_starts_its_own_trace(
    spans: InMemorySpanExporter,
) -> None:
    async with served(telemetry=True) as (http, _app):
        first = await send(http, "ops.add", {"a": 1, "b": 1})
        second = await send(http, "ops.add", {"a": 2, "b": 2})
    modules = {
        s.attributes["a2a.task.id"]: s
        for s in spans.get_finished_spans()
        if s.name == "execute ops.add" and s.attributes
    }
    one, two = modules[first["id"]], modules[second["id"]]
    assert one.context.trace_id != two.context.trace_id
    for module in (one, two):
        in_trace = _in_trace(spans, module.context.trace_id)
        request = _request_span(module, in_trace)
        assert request.parent is None


async def test_rest_streaming_and_background_runs_keep_the_parent(
    spans: InMemorySpanExporter,
) -> None:
    async with served(telemetry=True) as (http, _app):
        header, rest_trace, _ = _traceparent()
        params = message_params("ops.add", {"a": 1, "b": 2})
        reply = await http.post("/message:send", json=params, headers={**V1, "traceparent": header})
        assert reply.status_code == 200
        module, in_trace = await _module_span(spans, rest_trace, "ops.add")
        assert module.attributes and module.attributes["a2a.method.name"] == "SendMessage"
        _request_span(module, in_trace)

        header, stream_trace, _ = _traceparent()
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendStreamingMessage",
            "params": message_params("ops.add", {"a": 1, "b": 2}),
        }
        async with http.stream(
            "POST", "/", json=body, headers={**V1, "traceparent": header}
        ) as stream:
            async for _ in stream.aiter_lines():
                pass
        module, in_trace = await _module_span(spans, stream_trace, "ops.add")
        assert module.attributes
        assert module.attributes["a2a.method.name"] == "SendStreamingMessage"
        _request_span(module, in_trace)

        header, background_trace, _ = _traceparent()
        task = await send(
            http,
            "ops.sleep",
            {"seconds": 0.3},
            return_immediately=True,
            headers={"traceparent": header},
        )
        await wait_state(http, task["id"], {"TASK_STATE_COMPLETED"})
        module, in_trace = await _module_span(spans, background_trace, "ops.sleep")
        request = _request_span(module, in_trace)
        # the request answered before the module finished; the span still hangs below it
        assert request.end_time is not None and module.end_time is not None
        assert request.end_time < module.end_time


class _Large:
    """Answers 400 kB of text: more than a reader of the answer's bytes would read."""

    input_schema = TextIn
    output_schema = TextOut
    description = "Repeat the text 400,000 times"

    def execute(self, inputs: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"text": inputs["text"] * 400_000}


async def test_a_large_answer_still_names_its_task(spans: InMemorySpanExporter) -> None:
    """The span's task attributes come from the answer's objects, whatever its size."""
    registry = build_registry()
    registry.register("ops.large", _Large())
    header, trace_id, _ = _traceparent()
    async with served(registry, telemetry=True) as (http, _app):
        task = await send(http, "ops.large", {"text": "x"}, headers={"traceparent": header})
        module, in_trace = await _module_span(spans, trace_id, "ops.large")
    attributes = dict(_request_span(module, in_trace).attributes or {})
    assert attributes["a2a.task.id"] == task["id"]
    assert attributes["gen_ai.conversation.id"] == task["contextId"]
    assert attributes["a2a.task.state"] == "TASK_STATE_COMPLETED"


async def test_failed_run_marks_its_span(spans: InMemorySpanExporter) -> None:
    header, trace_id, _ = _traceparent()
    async with served(telemetry=True) as (http, _app):
        task = await send(http, "ops.fail", {"text": "x"}, headers={"traceparent": header})
        assert task["status"]["state"] == "TASK_STATE_FAILED"
        module, _ = await _module_span(spans, trace_id, "ops.fail")
    assert module.status.status_code == StatusCode.ERROR
    assert module.attributes is not None
    assert module.attributes["error.type"] == "OPS_BROKEN"
    assert module.attributes["a2a.task.state"] == "TASK_STATE_FAILED"


async def test_legacy_names_on_request(spans: InMemorySpanExporter) -> None:
    """``telemetry_legacy_names`` keeps the span names and attributes of apcore-a2a 0.1."""
    header, trace_id, _ = _traceparent()
    async with served(telemetry=True, telemetry_legacy_names=True) as (http, _app):
        task = await send(http, "ops.fail", {"text": "x"}, headers={"traceparent": header})
        module, in_trace = await _module_span(spans, trace_id, "ops.fail")
    assert _request_span(module, in_trace).name.startswith("POST")
    assert dict(module.attributes or {}) == {
        "a2a.task_id": task["id"],
        "a2a.context_id": task["contextId"],
        "a2a.skill_id": "ops.fail",
        "a2a.method": "SendMessage",
        "a2a.task_state": "failed",
        "apcore.error_code": "OPS_BROKEN",
    }


async def test_sdk_spans_follow_the_sdks_own_switch(spans: InMemorySpanExporter) -> None:
    """The SDK traces its handler as it would alone (its switch is its environment
    variable, the operator's); ours keep their parents among its spans."""
    header, trace_id, _ = _traceparent()
    async with served(telemetry=True) as (http, _app):
        await send(http, "ops.add", {"a": 1, "b": 1}, headers={"traceparent": header})
        module, _ = await _module_span(spans, trace_id, "ops.add")
    in_trace = _in_trace(spans, trace_id)
    assert [s for s in in_trace if s.instrumentation_scope.name == SDK_SCOPE]
    assert _request_span(module, in_trace).name == "SendMessage"


_SWITCHED_OFF = """
import asyncio, json
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.ops._agent import send, served

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)

async def main():
    async with served(telemetry=True) as (http, _app):
        await send(http, "ops.add", {"a": 1, "b": 1})
    spans = exporter.get_finished_spans()
    module = next(s for s in spans if s.name == "execute ops.add")
    by_id = {s.context.span_id: s for s in spans}
    parent = by_id.get(module.parent.span_id) if module.parent else None
    print(json.dumps({
        "sdk": sum(s.instrumentation_scope.name == "a2a-python-sdk" for s in spans),
        "parent": parent.name if parent else None,
    }))

asyncio.run(main())
"""


def test_the_sdks_switch_turns_only_its_spans_off() -> None:
    env = {**os.environ, "OTEL_INSTRUMENTATION_A2A_SDK_ENABLED": "false"}
    done = subprocess.run(
        [sys.executable, "-c", _SWITCHED_OFF],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {"sdk": 0, "parent": "SendMessage"}


@trace_function(span_name="tests.sdk_traced")
def _sdk_traced() -> None:
    """A function of anyone in the process, traced with the SDK's own decorator."""


async def _plain_answers(url: str, exporter: InMemorySpanExporter) -> list[Any]:
    """Bytes of what a plain a2a-sdk agent answers (ids fixed), with the SDK's span names."""
    answers: list[Any] = []
    async with httpx.AsyncClient(base_url=url, timeout=20, verify=TLS) as http:
        for method, path, body in (
            ("POST", "/", {"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {"id": "x"}}),
            ("POST", "/", {"jsonrpc": "2.0", "id": 8, "method": "Nope", "params": {}}),
            ("GET", "/tasks/x", None),
            ("POST", "/tasks/x:cancel", {}),
        ):
            exporter.clear()
            reply = await http.request(method, path, json=body, headers=V1)
            # the request's own spans (queues of other agents' tasks may close meanwhile)
            sdk = sorted(
                s.name
                for s in exporter.get_finished_spans()
                if s.instrumentation_scope.name == SDK_SCOPE
                and ("Dispatcher." in s.name or "RequestHandler" in s.name)
            )
            answers.append((reply.status_code, reply.headers["content-type"], reply.content, sdk))
    return answers


async def test_the_sdks_tracing_is_untouched_by_our_agents(spans: InMemorySpanExporter) -> None:
    """Issue 42 item 1: building or serving our agents (telemetry off and on) leaves the
    SDK's ``trace_function`` recording, and a plain a2a-sdk agent answering, as alone."""

    def recorded() -> int:
        spans.clear()
        _sdk_traced()
        return sum(s.name == "tests.sdk_traced" for s in spans.get_finished_spans())

    assert recorded() == 1
    before, _ = plain_agent()
    async with running_server(before) as before_url:
        alone = await _plain_answers(before_url, spans)
        assert all(sdk for *_, sdk in alone), "the plain agent recorded no SDK spans"
        for settings in ({}, {"telemetry": True}):
            A2AServerFactory(build_registry(), environ={}, **settings).create()
            assert recorded() == 1, settings
            async with served(**settings) as (http, _app):
                await send(http, "ops.add", {"a": 1, "b": 1})
                assert recorded() == 1, settings
                assert await _plain_answers(before_url, spans) == alone
            assert recorded() == 1, settings
        after, _ = plain_agent()
        async with running_server(after) as after_url:
            assert await _plain_answers(after_url, spans) == alone
        assert await _plain_answers(before_url, spans) == alone


async def test_nothing_is_traced_unless_enabled(spans: InMemorySpanExporter) -> None:
    header, trace_id, _ = _traceparent()
    async with served(metrics=True) as (http, _app):
        task = await send(http, "ops.add", {"a": 1, "b": 1}, headers={"traceparent": header})
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert _in_trace(spans, trace_id) == []
    ours = [s for s in spans.get_finished_spans() if s.instrumentation_scope.name != SDK_SCOPE]
    assert ours == []


async def test_health_and_metrics_are_not_traced(spans: InMemorySpanExporter) -> None:
    async with served(telemetry=True, metrics=True) as (http, _app):
        assert (await http.get("/health")).status_code == 200
        assert (await http.get("/metrics?format=prometheus")).status_code == 200
        assert (await http.get("/.well-known/agent-card.json")).status_code == 200
        reply = await rpc(http, "GetTask", {"id": "missing"})
        assert reply["error"]["code"] == -32001
    targets = {
        str((s.attributes or {}).get("url.path") or (s.attributes or {}).get("http.target"))
        for s in spans.get_finished_spans()
        if s.kind == SpanKind.SERVER
    }
    assert "/health" not in targets
    assert not any(t.startswith("/metrics") for t in targets)
    assert {"/.well-known/agent-card.json", "/"} <= targets


def test_telemetry_without_the_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from apcore_a2a import A2AServerFactory

    from ._agent import build_registry

    # as if opentelemetry-instrumentation-asgi were not installed
    monkeypatch.setitem(sys.modules, "opentelemetry.instrumentation.asgi", None)
    with pytest.raises(RuntimeError, match=r"apcore-a2a\[telemetry\]"):
        A2AServerFactory(build_registry(), environ={}, telemetry=True).create()
    # off, nothing of it is needed
    A2AServerFactory(build_registry(), environ={}).create()


async def test_span_attributes_from_the_request_are_bounded(spans: InMemorySpanExporter) -> None:
    # A client chooses its message id, context id, reference task ids and tenant: up to
    # max_string_bytes in all, thousands of them. A span (exported, stored, indexed by the
    # tracing backend) keeps a bounded part of each, however much was sent.
    header, trace_id, _ = _traceparent()
    params = message_params("ops.add", {"a": 1, "b": 2})
    huge = "m" * 50_000
    params["message"].update(
        messageId=huge, contextId="c" * 50_000, referenceTaskIds=[f"t{i}" for i in range(1500)]
    )
    async with served(telemetry=True) as (http, _app):
        reply = await rpc(http, "SendMessage", params, {"traceparent": header})
        assert reply["result"]["task"]["contextId"] == "c" * 50_000  # served as sent
        module, in_trace = await _module_span(spans, trace_id, "ops.add")
    for span in (module, _request_span(module, in_trace)):
        attributes = dict(span.attributes or {})
        for key, value in attributes.items():
            values = list(value) if isinstance(value, tuple | list) else [value]
            assert len(values) <= telemetry.MAX_LIST, (span.name, key, len(values))
            for one in values:
                assert len(str(one)) <= telemetry.MAX_VALUE, (span.name, key, len(str(one)))
        assert span.name in ("SendMessage", "execute ops.add")
    request = dict(_request_span(module, in_trace).attributes or {})
    assert request["a2a.message.id"] == huge[: telemetry.MAX_VALUE]
    assert list(request["a2a.message.reference_task_ids"])[:2] == ["t0", "t1"]


async def test_span_attributes_show_a_callers_control_characters_escaped(
    spans: InMemorySpanExporter,
) -> None:
    # Ids, a REST path (percent-decoded), a User-Agent: the caller's. A span keeps no raw
    # control character of them (a trace viewer is a terminal too) and no more than
    # MAX_VALUE characters of any, the HTTP instrumentation's attributes included.
    sent = "a\x1b[2Jb\x00c"
    shown = "a\\x1b[2Jb\\x00c"
    header, json_trace, _ = _traceparent()
    agent = {"User-Agent": "U" * 5000, **V1}
    async with served(telemetry=True) as (http, _app):
        reply = await rpc(http, "GetTask", {"id": sent}, {"traceparent": header, **agent})
        assert reply["error"]["code"] == -32001
        header, rest_trace, _ = _traceparent()
        path = "/tasks/a%1B%5B2Jb%00c?historyLength=1&x=%1B" + "q" * 3000
        reply_rest = await http.get(path, headers={"traceparent": header, **agent})
        assert reply_rest.status_code == 404
    for trace_id in (json_trace, rest_trace):
        in_trace = _in_trace(spans, trace_id)
        (server,) = [s for s in in_trace if s.kind == SpanKind.SERVER and s.name == "GetTask"]
        attributes = dict(server.attributes or {})
        assert attributes["a2a.task.id"] == shown, attributes
        for key, value in attributes.items():
            if isinstance(value, str):
                assert len(value) <= telemetry.MAX_VALUE, (key, len(value))
                assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in value), key


async def test_a_span_named_after_a_path_shows_it_bounded_and_escaped(
    spans: InMemorySpanExporter,
) -> None:
    # Under the legacy names a request span keeps the HTTP instrumentation's name: the
    # method and the path as the caller spelled it (percent-decoded, up to 16 KiB).
    header, trace_id, _ = _traceparent()
    async with served(telemetry=True, telemetry_legacy_names=True) as (http, _app):
        path = "/tasks/a%1B%5B2Jb%00c" + "q" * 3000
        answer = await http.get(path, headers={"traceparent": header, **V1})
        assert answer.status_code == 404
    (server,) = [s for s in _in_trace(spans, trace_id) if s.name.startswith("GET ")]
    assert server.name.startswith("GET /tasks/a\\x1b[2Jb\\x00cqqq"), server.name[:40]
    assert len(server.name) <= telemetry.MAX_VALUE, len(server.name)


async def test_a_captured_request_header_is_bounded_and_escaped(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An operator may have the HTTP instrumentation copy request headers to the span
    # (OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_SERVER_REQUEST): each is the caller's, up
    # to a request head of 16 KiB, and a list of values, even when path and agent are short.
    monkeypatch.setenv("OTEL_INSTRUMENTATION_HTTP_CAPTURE_HEADERS_SERVER_REQUEST", "x-note")
    header, trace_id, _ = _traceparent()
    note = b"a\x9b[2Jb" + b"n" * 5000
    async with served(telemetry=True) as (http, _app):
        reply = await rpc(http, "GetTask", {"id": "t"}, {"traceparent": header, "X-Note": note})
        assert reply["error"]["code"] == -32001
    (server,) = [s for s in _in_trace(spans, trace_id) if s.name == "GetTask"]
    captured = (server.attributes or {})["http.request.header.x_note"]
    assert isinstance(captured, tuple) and len(captured) == 1, captured
    assert captured[0].startswith("a\\x9b[2Jbnnn"), captured[0][:20]
    assert len(captured[0]) <= telemetry.MAX_VALUE, len(captured[0])
