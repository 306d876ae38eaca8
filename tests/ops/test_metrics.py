"""``GET /metrics``: counters that match a known sequence of calls, in JSON and Prometheus."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ._agent import (
    V1,
    build_registry,
    message_params,
    rpc,
    send,
    served,
    streaming_body,
    wait_state,
)


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a Prometheus exposition, parsed by prometheus_client's own parser."""
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


async def _prometheus(http: httpx.AsyncClient, **kwargs: Any) -> dict[Any, float]:
    response = await http.get("/metrics", **kwargs)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return _samples(response.text)


async def test_metrics_is_404_unless_enabled() -> None:
    async with served() as (http, _app):
        for path in ("/metrics", "/metrics?format=prometheus", "/metrics/"):
            response = await http.get(path)
            assert response.status_code == 404, path
            assert "apcore_a2a" not in response.text
        assert (await http.get("/health")).status_code == 200


async def test_counters_match_a_known_sequence_in_both_formats() -> None:
    completed, failed, canceled = 3, 2, 1
    async with served(metrics=True) as (http, _app):
        # The expected request count comes from the client: every A2A call it sends
        # (POST /), GetTask polls included; card, health and metrics GETs are not A2A.
        sent_by_client = 0

        async def count(request: httpx.Request) -> None:
            nonlocal sent_by_client
            if request.method == "POST" and request.url.path == "/":
                sent_by_client += 1

        http.event_hooks["request"].append(count)
        for i in range(completed):
            task = await send(http, "ops.add", {"a": i, "b": 1})
            assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        for _ in range(failed):
            task = await send(http, "ops.fail", {"text": "nope"})
            assert task["status"]["state"] == "TASK_STATE_FAILED"
        slow = await send(http, "ops.sleep", {"seconds": 30}, return_immediately=True)
        await wait_state(http, slow["id"], {"TASK_STATE_WORKING"})
        running = (await http.get("/metrics")).json()
        assert running["active_tasks"] == 1
        assert running["total_requests"] == sent_by_client
        cancel = await rpc(http, "CancelTask", {"id": slow["id"]})
        assert cancel["result"]["status"]["state"] == "TASK_STATE_CANCELED"
        await http.get("/.well-known/agent-card.json")
        await http.get("/health")
        # sends + GetTask polls + one CancelTask
        sent = sent_by_client
        assert sent >= completed + failed + 1 + 1 + 1

        body = (await http.get("/metrics")).json()
        assert body["completed_tasks"] == completed
        assert body["failed_tasks"] == failed
        assert body["canceled_tasks"] == canceled
        assert body["active_tasks"] == 0
        assert body["total_requests"] == sent
        assert body["sse_active_streams"] == 0
        assert body["push_notifications_sent"] == body["push_notifications_failed"] == 0
        assert body["uptime_seconds"] > 0
        assert set(body) == {
            "active_tasks",
            "completed_tasks",
            "failed_tasks",
            "canceled_tasks",
            "total_requests",
            "uptime_seconds",
            "sse_active_streams",
            "push_notifications_sent",
            "push_notifications_failed",
            "push_notifications_pending",
            "push_notifications_dropped",
            "push_notifications_retried",
            "push_notifications_held_bytes",
        }

        samples = await _prometheus(http, headers={"Accept": "text/plain"})
        assert samples[("apcore_a2a_completed_tasks_total", ())] == completed
        assert samples[("apcore_a2a_failed_tasks_total", ())] == failed
        assert samples[("apcore_a2a_canceled_tasks_total", ())] == canceled
        assert samples[("apcore_a2a_requests_total", ())] == sent
        assert samples[("apcore_a2a_active_tasks", ())] == 0
        assert samples[("apcore_a2a_sse_active_streams", ())] == 0
        executions = "apcore_a2a_skill_executions_total"
        assert samples[(executions, (("skill", "ops.add"), ("state", "completed")))] == completed
        assert samples[(executions, (("skill", "ops.fail"), ("state", "failed")))] == failed
        assert samples[(executions, (("skill", "ops.sleep"), ("state", "canceled")))] == canceled
        errors = "apcore_a2a_skill_errors_total"
        assert samples[(errors, (("code", "OPS_BROKEN"), ("skill", "ops.fail")))] == failed
        duration = "apcore_a2a_skill_duration_seconds_count"
        assert samples[(duration, (("skill", "ops.add"),))] == completed
        assert samples[(duration, (("skill", "ops.sleep"),))] == canceled
        inf = samples[
            ("apcore_a2a_skill_duration_seconds_bucket", (("le", "+Inf"), ("skill", "ops.fail")))
        ]
        assert inf == failed


async def test_format_selection() -> None:
    async with served(metrics=True) as (http, _app):
        await send(http, "ops.add", {"a": 1, "b": 1})
        default = await http.get("/metrics")
        assert default.headers["content-type"] == "application/json"
        assert default.headers["cache-control"] == "no-store"
        assert json.loads(default.text)["completed_tasks"] == 1
        as_json = await http.get("/metrics", headers={"Accept": "application/json"})
        assert as_json.json()["completed_tasks"] == 1
        by_param = await _prometheus(http, params={"format": "prometheus"})
        assert by_param[("apcore_a2a_completed_tasks_total", ())] == 1
        # the param wins over the Accept header, both ways
        forced_json = await http.get(
            "/metrics", params={"format": "json"}, headers={"Accept": "text/plain"}
        )
        assert forced_json.json()["completed_tasks"] == 1
        scraper = await http.get(
            "/metrics",
            headers={"Accept": "application/openmetrics-text; version=1.0.0,text/plain;q=0.5"},
        )
        assert scraper.headers["content-type"].startswith("application/openmetrics-text")
        assert scraper.text.rstrip().endswith("# EOF")
        assert "apcore_a2a_completed_tasks_total 1.0" in scraper.text


async def test_no_task_content_or_identity_in_metrics() -> None:
    secret = "hunter2-very-private-content"
    async with served(metrics=True, api_keys=("key-of-alice",)) as (http, _app):
        auth = {"X-API-Key": "key-of-alice"}
        await send(http, "ops.fail", {"text": secret}, headers=auth)
        await send(http, "ops.add", {"a": 40, "b": 2}, headers=auth)
        unauthenticated = await http.post(
            "/", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
        )
        assert unauthenticated.status_code == 401
        # with auth on, the per-skill figures are for callers with credentials only
        assert (await http.get("/metrics")).status_code == 401
        for text in (
            (await http.get("/metrics", headers=auth)).text,
            (await http.get("/metrics?format=prometheus", headers=auth)).text,
        ):
            assert secret not in text
            assert "alice" not in text
            assert "key-of" not in text
        samples = await _prometheus(http, params={"format": "prometheus"}, headers=auth)
        labels = {dict(key[1]).get("skill") for key in samples} - {None}
        assert labels == {"ops.add", "ops.fail"}


async def test_unknown_skills_do_not_become_labels() -> None:
    async with served(metrics=True) as (http, _app):
        reply = await rpc(http, "SendMessage", message_params("ops.nope-" + "x" * 50, {"a": 1}))
        assert reply["error"]["code"] == -32601
        body = (await http.get("/metrics")).json()
        assert body["total_requests"] == 1
        assert body["completed_tasks"] == body["failed_tasks"] == 0
        text = (await http.get("/metrics?format=prometheus")).text
        assert "ops.nope" not in text


async def test_open_streams_and_running_tasks_are_live_values() -> None:
    async with served(metrics=True) as (http, _app):
        body = streaming_body("ops.sleep", {"seconds": 0.6})
        async with http.stream("POST", "/", json=body, headers=V1) as stream:
            lines = stream.aiter_lines()
            first = await anext(lines)
            while not first.startswith("data:"):  # the event's `id:` line comes first
                first = await anext(lines)
            during = (await http.get("/metrics")).json()
            assert during["sse_active_streams"] == 1
            assert during["active_tasks"] == 1
            async for _line in lines:
                pass
        after = (await http.get("/metrics")).json()
        assert after["sse_active_streams"] == 0
        assert after["active_tasks"] == 0
        assert after["completed_tasks"] == 1


async def test_two_agents_in_one_process_keep_separate_counters() -> None:
    async with (
        served(metrics=True) as (first, _a),
        served(build_registry(), metrics=True) as (second, _b),
    ):
        await asyncio.gather(*(send(first, "ops.add", {"a": 1, "b": i}) for i in range(4)))
        await send(second, "ops.add", {"a": 1, "b": 1})
        assert (await first.get("/metrics")).json()["completed_tasks"] == 4
        assert (await second.get("/metrics")).json()["completed_tasks"] == 1
        prom = await _prometheus(second, params={"format": "prometheus"})
        assert prom[("apcore_a2a_completed_tasks_total", ())] == 1


async def test_metrics_rejects_other_methods() -> None:
    async with served(metrics=True) as (http, _app):
        assert (await http.post("/metrics", json={})).status_code == 405
        assert (await http.post("/health", json={})).status_code == 405


async def test_push_delivery_counters_follow_the_receiver() -> None:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from .._support import running_server

    seen: dict[str, list[dict[str, Any]]] = {"ok": [], "bad": []}

    async def hook(request: Request) -> Response:
        kind = request.path_params["kind"]
        seen[kind].append(await request.json())
        return Response(status_code=200 if kind == "ok" else 400)

    receiver = Starlette(routes=[Route("/{kind}", hook, methods=["POST"])])
    async with (
        running_server(receiver) as hooks,
        served(
            metrics=True,
            push_notifications=True,
            push_allow_insecure_urls=True,
            push_retry_delays=(),
        ) as (http, _app),
    ):
        for kind in ("ok", "bad"):
            params = message_params("ops.add", {"a": 1, "b": 2})
            params["configuration"] = {"taskPushNotificationConfig": {"url": f"{hooks}/{kind}"}}
            reply = await rpc(http, "SendMessage", params)
            assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"

        def finished() -> bool:
            return any("COMPLETED" in json.dumps(event) for event in seen["ok"])

        async with asyncio.timeout(10):
            while not (finished() and seen["bad"]):
                await asyncio.sleep(0.02)
            while (body := (await http.get("/metrics")).json())["push_notifications_sent"] < len(
                seen["ok"]
            ):
                await asyncio.sleep(0.02)
        assert body["push_notifications_sent"] == len(seen["ok"]) >= 2
        # the 400 abandons the delivery at once and fails the config: one failure
        assert body["push_notifications_failed"] == len(seen["bad"]) == 1
        samples = await _prometheus(http, params={"format": "prometheus"})
        assert samples[("apcore_a2a_push_notifications_sent_total", ())] == len(seen["ok"])
        assert samples[("apcore_a2a_push_notifications_failed_total", ())] == 1


async def test_push_drops_retries_and_held_bytes_follow_real_deliveries() -> None:
    """The sender's ``dropped``, ``retried`` and ``held_bytes`` were attributes only; they
    are served as ``push_notifications_dropped_total``, ``_retried_total`` (counters) and
    ``push_notifications_held_bytes`` (a gauge), in JSON and Prometheus alike."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from .._support import running_server

    gate = asyncio.Event()
    seen: dict[str, list[bytes]] = {"slow": [], "down": []}

    async def hook(request: Request) -> Response:
        kind = request.path_params["kind"]
        seen[kind].append(await request.body())
        if kind == "down":
            return Response(status_code=503)  # retried, then given up
        await gate.wait()
        return Response(status_code=200)

    async def until(check: Any) -> dict[str, Any]:
        async with asyncio.timeout(20):
            while not check(body := (await http.get("/metrics")).json()):
                await asyncio.sleep(0.02)
        return body

    receiver = Starlette(routes=[Route("/{kind}", hook, methods=["POST"])])
    async with (
        running_server(receiver) as hooks,
        served(
            metrics=True,
            push_notifications=True,
            push_allow_insecure_urls=True,
            push_retry_delays=(0.01,),
        ) as (http, _app),
    ):

        async def task_for(kind: str) -> None:
            params = message_params("ops.add", {"a": 1, "b": 2})
            params["configuration"] = {"taskPushNotificationConfig": {"url": f"{hooks}/{kind}"}}
            reply = await rpc(http, "SendMessage", params)
            assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"

        # A receiver that holds its first POST: the events wait, their bodies held.
        await task_for("slow")
        held = await until(lambda body: seen["slow"] and body["push_notifications_pending"] > 1)
        gate.set()
        done = await until(lambda body: body["push_notifications_pending"] == 0)
        events = len(seen["slow"])
        # the bodies held when scraped: the one in flight and those queued behind it
        waiting = seen["slow"][: held["push_notifications_pending"]]
        assert held["push_notifications_held_bytes"] == sum(map(len, waiting)) > 0
        assert done["push_notifications_held_bytes"] == 0
        assert done["push_notifications_sent"] == events
        assert done["push_notifications_dropped"] == done["push_notifications_retried"] == 0

        # A receiver that answers 503: its first event retried once, then given up on; the
        # task's other events dropped (queued behind it, or after the failure).
        await task_for("down")
        body = await until(lambda body: body["push_notifications_dropped"] >= events - 1)
        assert len(seen["down"]) == 2
        assert body["push_notifications_failed"] == 1
        assert body["push_notifications_retried"] == 1
        assert body["push_notifications_dropped"] == events - 1
        assert body["push_notifications_held_bytes"] == body["push_notifications_pending"] == 0
        samples = await _prometheus(http, params={"format": "prometheus"})
        assert samples[("apcore_a2a_push_notifications_retried_total", ())] == 1
        assert samples[("apcore_a2a_push_notifications_dropped_total", ())] == events - 1
        assert samples[("apcore_a2a_push_notifications_held_bytes", ())] == 0


def test_metrics_without_prometheus_client_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from apcore_a2a import A2AServerFactory

    # as if the "metrics" extra (prometheus-client) were not installed
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    monkeypatch.delitem(sys.modules, "apcore_a2a.ops.metrics", raising=False)
    with pytest.raises(RuntimeError, match=r"apcore-a2a\[metrics\]"):
        A2AServerFactory(build_registry(), environ={}, metrics=True).create()
    app, _card = A2AServerFactory(build_registry(), environ={}).create()
    assert app.state.a2a.ops.metrics is None
