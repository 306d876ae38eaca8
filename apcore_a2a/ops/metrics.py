"""Counters behind ``/metrics``: JSON for people, Prometheus exposition for scrapers.

:class:`Metrics` is an execution observer: each finished execution counts once, by skill
and final state, with its duration and apcore error code; live values (streams, pushes,
running tasks, uptime) are read at scrape time. Each app has its own ``prometheus_client``
registry, never the global one, so two agents in one process never clash. Labels are skill
ids, task states and error codes: no identities, no task content.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Container, Iterator, Mapping

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from apcore_a2a.execution.observer import Execution

#: Histogram buckets (seconds) for skill durations: 5 ms to 30 s (longer runs land in +Inf).
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_PREFIX = "apcore_a2a"
#: The figures of ``GET /metrics`` in order: JSON key, Prometheus kind and help text. The
#: Prometheus name is the key without ``total_`` (a counter gets ``_total`` appended).
FIGURES = (
    ("active_tasks", "gauge", "Executions running now"),
    ("completed_tasks", "counter", "Tasks that ended completed"),
    ("failed_tasks", "counter", "Tasks that ended failed"),
    ("canceled_tasks", "counter", "Tasks that ended canceled"),
    ("total_requests", "counter", "A2A requests received"),
    ("uptime_seconds", "gauge", "Seconds since the server started"),
    ("sse_active_streams", "gauge", "Open SSE streams"),
    ("push_notifications_sent", "counter", "Push deliveries acknowledged by the receiver"),
    ("push_notifications_failed", "counter", "Push deliveries abandoned"),
    ("push_notifications_pending", "gauge", "Push deliveries queued or under way now"),
    ("push_notifications_dropped", "counter", "Push events dropped undelivered"),
    ("push_notifications_retried", "counter", "Push attempts failed and tried again"),
    ("push_notifications_held_bytes", "gauge", "Bytes of push bodies queued or under way now"),
)


class Metrics(Collector):
    """Execution and request counters of one agent; *live* (live :data:`FIGURES` by key)
    is read once per rendering."""

    def __init__(self, live: Callable[[], Mapping[str, float]] = dict) -> None:
        # No auto_describe: registering must not collect (live values are read at scrape time).
        self.registry = CollectorRegistry()
        self.live = live
        self.total_requests = 0
        self.by_skill_state: Counter[tuple[str, str]] = Counter()
        self.errors: Counter[tuple[str, str]] = Counter()
        self._tasks: Counter[str] = Counter()
        self._duration = Histogram(
            f"{_PREFIX}_skill_duration_seconds",
            "Time from the start of an execution to its final event, by skill",
            ["skill"],
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(self)

    def count_request(self) -> None:
        """One more A2A request received (any method, any outcome)."""
        self.total_requests += 1

    def started(self, execution: Execution) -> None:
        """Running executions are read from the tracker; nothing to count yet."""

    def finished(self, execution: Execution) -> None:
        self.by_skill_state[(execution.skill_id, execution.state)] += 1
        if not execution.reply:
            self._tasks[execution.state] += 1
        if execution.error_code and execution.state != "completed":
            self.errors[(execution.skill_id, execution.error_code)] += 1
        self._duration.labels(execution.skill_id).observe(execution.seconds)

    def snapshot(self) -> dict[str, float]:
        """The JSON document of ``GET /metrics``: :data:`FIGURES` by key, counted here or
        read from *live* (0 when it has no such value)."""
        counted = {f"{s}_tasks": self._tasks[s] for s in ("completed", "failed", "canceled")}
        counted["total_requests"] = self.total_requests
        live = self.live()
        return {key: counted.get(key, live.get(key, 0)) for key, _, _ in FIGURES}

    def skills(self) -> set[str]:
        """The skills the figures name."""
        return {skill for skill, _ in (*self.by_skill_state, *self.errors)}

    def exposition(
        self, accept: str = "", skills: Container[str] | None = None
    ) -> tuple[bytes, str]:
        """Prometheus text (or OpenMetrics, if *accept* asks for it) and its content type;
        with *skills*, the samples of other skills left out (a caller sees the figures of
        the skills the ACL shows it, as on its card)."""
        encoder, content_type = choose_encoder(accept)
        body: bytes = encoder(self.registry)
        if skills is not None:
            lines = body.split(b"\n")
            body = b"\n".join(line for line in lines if _shown(line, skills))
        return body, content_type

    def collect(self) -> Iterator[Metric]:
        snapshot = self.snapshot()
        for key, kind, text in FIGURES:
            make = GaugeMetricFamily if kind == "gauge" else CounterMetricFamily
            yield make(f"{_PREFIX}_{key.removeprefix('total_')}", text, value=snapshot[key])
        by_skill = (
            ("executions", "Executions by skill and final state", "state", self.by_skill_state),
            (
                "errors",
                "Executions that did not complete, by skill and apcore error code",
                "code",
                self.errors,
            ),
        )
        for key, text, label, counts in by_skill:
            family = CounterMetricFamily(f"{_PREFIX}_skill_{key}", text, labels=["skill", label])
            for labels, count in sorted(counts.items()):
                family.add_metric(list(labels), count)
            yield family


def _shown(line: bytes, skills: Container[str]) -> bool:
    start = line.find(b'skill="')
    if start < 0 or line.startswith(b"#"):
        return True
    name = line[start + 7 : line.find(b'"', start + 7)]
    return name.decode("utf-8", "replace") in skills
