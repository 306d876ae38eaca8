"""Retrying, ordered, signed webhook delivery of task events.

The SDK calls :meth:`RetryingPushSender.send_notification` inline while it persists each
task event, so this method only serializes the event and queues it; one worker per
``(task_id, config_id)`` then POSTs the queued events in order. A slow or dead receiver
therefore never delays the task, and never reorders what another receiver sees.

Per attempt: the URL passes the SSRF policy again, a fresh JWT is signed over the exact
body, and the POST gets ``push_timeout`` seconds. Connection errors, timeouts, 5xx and
429 are retried after each of ``push_retry_delays``; when those are used up (or the
receiver answers another 4xx, or the URL is now refused) the delivery is abandoned, the
config is marked ``failed`` and later events for it are dropped until it is registered
again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import httpx
from a2a.server.tasks.push_notification_config_store import PushNotificationConfigStore
from a2a.server.tasks.push_notification_sender import PushNotificationEvent, PushNotificationSender
from a2a.types import TaskPushNotificationConfig
from a2a.utils.proto_utils import to_stream_response
from google.protobuf.json_format import MessageToDict

from apcore_a2a.push.policy import PushUrlPolicy
from apcore_a2a.push.signing import SigningKey
from apcore_a2a.push.status import ConfigStatusBook

__all__ = ["RetryingPushSender"]

logger = logging.getLogger("apcore_a2a.push")

_Key = tuple[str, str]


@dataclass(frozen=True, slots=True)
class _Delivery:
    task_id: str
    config_id: str
    url: str
    token: str
    body: bytes
    delivery_id: str


class _GiveUp(Exception):
    """The delivery cannot succeed; the message is the reason recorded on the config."""


def _retryable(status: int) -> bool:
    return status >= 500 or status == 429


class RetryingPushSender(PushNotificationSender):
    """A ``PushNotificationSender`` with per-config ordering, retries and JWT signing.

    Counters (plain ints, read them for metrics): ``sent`` deliveries acknowledged with
    2xx, ``failed`` deliveries abandoned, ``retried`` retry attempts made, ``dropped``
    events skipped because their config had already failed.
    """

    def __init__(
        self,
        config_store: PushNotificationConfigStore,
        *,
        policy: PushUrlPolicy,
        statuses: ConfigStatusBook,
        issuer: str,
        timeout: float = 10.0,
        retry_delays: Sequence[float] = (1.0, 2.0, 4.0),
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self._store = config_store
        self._policy = policy
        self._statuses = statuses
        self._issuer = issuer
        self._timeout = timeout
        self._delays = tuple(retry_delays)
        self._client = client
        self._owns_client = client is None
        self._key: SigningKey | None = None
        self._queues: dict[_Key, asyncio.Queue[_Delivery]] = {}
        self._workers: dict[_Key, asyncio.Task[None]] = {}
        self._closing = False
        self.sent = 0
        self.failed = 0
        self.retried = 0
        self.dropped = 0

    # -- lifecycle ---------------------------------------------------------------------
    def start(self, key: SigningKey) -> None:
        """Begin accepting events, signing them with *key*."""
        self._key = key
        self._closing = False
        if self._client is None:
            # Redirects are not followed: a 3xx could point past the SSRF policy.
            self._client = httpx.AsyncClient(timeout=self._timeout, follow_redirects=False)

    async def aclose(self, drain_timeout: float = 10.0) -> None:
        """Stop accepting events; let queued deliveries finish for up to *drain_timeout* s."""
        self._closing = True
        workers = list(self._workers.values())
        if workers:
            _done, pending = await asyncio.wait(workers, timeout=drain_timeout)
            if pending:
                logger.warning("push: shutting down with %d event(s) not delivered", self.pending)
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
        if self._owns_client and self._client is not None:
            await self._client.aclose()
            self._client = None

    @property
    def pending(self) -> int:
        """Events queued or being delivered right now."""
        return sum(q.qsize() for q in self._queues.values()) + len(self._workers)

    async def idle(self) -> None:
        """Wait until every queued event has been delivered or abandoned."""
        while self._workers:
            await asyncio.gather(*list(self._workers.values()), return_exceptions=True)

    # -- PushNotificationSender --------------------------------------------------------
    async def send_notification(self, task_id: str, event: PushNotificationEvent) -> None:
        if self._closing or self._key is None:
            logger.warning("push: sender not running, event for task %s not delivered", task_id)
            return
        try:
            configs = await self._store.get_info_for_dispatch(task_id)
        except Exception:
            logger.exception("push: cannot read push configs of task %s", task_id)
            return
        if not configs:
            return
        # Serialized once, now: the body is what gets hashed into every attempt's JWT.
        body = json.dumps(
            MessageToDict(to_stream_response(event)), separators=(",", ":"), ensure_ascii=False
        ).encode("utf-8")
        for config in configs:
            self._enqueue(task_id, config, body)

    def _enqueue(self, task_id: str, config: TaskPushNotificationConfig, body: bytes) -> None:
        config_id = config.id or task_id
        key = (task_id, config_id)
        delivery = _Delivery(task_id, config_id, config.url, config.token, body, str(uuid.uuid4()))
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = asyncio.Queue()
        queue.put_nowait(delivery)
        if key not in self._workers:
            self._workers[key] = asyncio.create_task(
                self._work(key, queue), name=f"a2a-push:{task_id}:{config_id}"
            )

    # -- delivery ----------------------------------------------------------------------
    async def _work(self, key: _Key, queue: asyncio.Queue[_Delivery]) -> None:
        try:
            while not queue.empty():
                delivery = queue.get_nowait()
                try:
                    await self._deliver_once(delivery)
                except Exception:
                    logger.exception("push: unexpected error delivering to %s", delivery.url)
        finally:
            # No await between the empty() check above and here, so no event can slip
            # into a queue whose worker is gone.
            self._workers.pop(key, None)
            if self._queues.get(key) is queue and queue.empty():
                del self._queues[key]

    async def _deliver_once(self, delivery: _Delivery) -> None:
        if await self._statuses.failure(delivery.task_id, delivery.config_id) is not None:
            self.dropped += 1
            return
        try:
            await self._attempt_all(delivery)
        except _GiveUp as stop:
            self.failed += 1
            reason = str(stop)
            logger.error(
                "push: giving up on config %s of task %s (%s): %s",
                delivery.config_id,
                delivery.task_id,
                delivery.url,
                reason,
            )
            await self._statuses.mark_failed(delivery.task_id, delivery.config_id, reason)
        else:
            self.sent += 1

    async def _attempt_all(self, delivery: _Delivery) -> None:
        attempts = len(self._delays) + 1
        for attempt in range(1, attempts + 1):
            refused = await self._policy.check(delivery.url)
            if refused is not None:
                raise _GiveUp(f"URL refused at delivery: {refused}")
            problem = await self._post(delivery)
            if problem is None:
                return
            if attempt == attempts:
                raise _GiveUp(f"{problem} (after {attempts} attempts)")
            delay = self._delays[attempt - 1]
            self.retried += 1
            logger.warning(
                "push: delivery to %s for task %s failed (%s); retry %d/%d in %.1f s",
                delivery.url,
                delivery.task_id,
                problem,
                attempt,
                attempts - 1,
                delay,
            )
            await asyncio.sleep(delay)

    async def _post(self, delivery: _Delivery) -> str | None:
        """One attempt: ``None`` on success, a retryable problem, or raise ``_GiveUp``."""
        if self._key is None or self._client is None:
            raise _GiveUp("sender is not running")
        token = self._key.sign_delivery(
            issuer=self._issuer,
            audience=delivery.url,
            task_id=delivery.task_id,
            body=delivery.body,
            jti=delivery.delivery_id,
            now=time.time(),
        )
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
        if delivery.token:
            headers["X-A2A-Notification-Token"] = delivery.token
        try:
            response = await self._client.post(
                delivery.url, content=delivery.body, headers=headers, timeout=self._timeout
            )
        except httpx.TimeoutException:
            return f"no answer within {self._timeout:g} s"
        except httpx.TransportError as exc:
            return f"connection error: {type(exc).__name__}"
        with contextlib.suppress(httpx.HTTPError):
            await response.aclose()
        if response.is_success:
            return None
        if _retryable(response.status_code):
            return f"HTTP {response.status_code}"
        raise _GiveUp(f"receiver answered HTTP {response.status_code}")
