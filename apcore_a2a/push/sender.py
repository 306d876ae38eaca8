"""Retrying, ordered, signed webhook delivery of task events that cannot hurt the agent.

The SDK calls :meth:`RetryingPushSender.send_notification` inline while it persists each
task event, so it only serializes the event and queues it; one worker per
``(task_id, config_id)`` POSTs the queue in order, so a slow or dead receiver never delays
the task nor reorders what another receiver sees. Each attempt is ``attempt.py``'s (one
deadline, a bounded answer read). Bounds here: ``push_queue_size`` events per config, one
more marks it ``failed``; ``push_queue_bytes`` of bodies held (queued or being delivered)
across all configs, an event beyond it marks its config ``failed`` the same way;
``push_max_deliveries`` attempts in flight across all configs (connections held), half of
them at most for one caller's tasks, so a caller whose receivers stall never holds up
another's deliveries; idle connections kept alive between deliveries are bounded apart
(``_egress.NamePools``: 16 names, 20 each, 4 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING

from a2a.server.agent_execution.active_task import TERMINAL_TASK_STATES as _FINAL
from a2a.server.tasks.push_notification_sender import PushNotificationEvent, PushNotificationSender
from a2a.types import Task, TaskPushNotificationConfig, TaskStatusUpdateEvent
from cachetools import LRUCache

from apcore_a2a.adapters.errors import one_line
from apcore_a2a.push.aimed import Webhooks
from apcore_a2a.push.attempt import Delivery, GiveUp, config_headers, try_once
from apcore_a2a.push.bodies import V0_3, body_v03, body_v10
from apcore_a2a.push.configs import PushConfigStore
from apcore_a2a.push.lookups import CallerShares
from apcore_a2a.push.policy import PushUrlPolicy
from apcore_a2a.push.status import Aim

if TYPE_CHECKING:
    from apcore_a2a.push.signing import SigningKey

logger = logging.getLogger("apcore_a2a.push")

_Key = tuple[str, str]
#: tasks whose final status is remembered as pushed; a task forgotten (with this many
#: settled after it) is at most pushed its cancel once more
_SETTLED_TASKS = 10_000


class _Queue(deque[Delivery]):
    overflowed = False  # the receiver fell too far behind; nothing more is queued
    size = 0  # bytes of the bodies queued (not the one being delivered)
    sending = 0  # bytes of the body being delivered
    attempting = False  # whether that body is in an attempt (its POST), not waiting
    caller = ""  # the quota key of the caller whose task it is
    aim = Aim("", "", "", "", "")  # the config its deliveries follow (status.aim)

    def push(self, delivery: Delivery, aim: Aim) -> None:
        self.append(delivery)
        self.size += len(delivery.body)
        self.caller = delivery.caller
        self.aim = aim

    def pop_first(self) -> Delivery:
        delivery = self.popleft()
        self.size -= len(delivery.body)
        self.sending = len(delivery.body)
        return delivery

    def drop(self) -> int:
        """Empty the queue; the bytes its bodies held."""
        freed, self.size = self.size, 0
        self.clear()
        return freed

    @property
    def stoppable(self) -> int:
        """The bytes stopping this queue gives back now: the queued bodies, and the one
        being delivered unless its POST is under way (waiting for a slot, or a retry)."""
        return self.size + (0 if self.attempting else self.sending)


class RetryingPushSender(PushNotificationSender):
    """A ``PushNotificationSender`` with per-config ordering, retries, bounds and signing.

    Served on ``/metrics`` (docs/operations.md): the counters ``sent``, ``failed``,
    ``retried``, ``dropped``; ``held_bytes``, the bodies held now (queued or being sent).
    """

    def __init__(
        self,
        config_store: PushConfigStore,
        *,
        policy: PushUrlPolicy,
        issuer: str | Callable[[], str],
        timeout: float = 10.0,
        retry_delays: Sequence[float] = (1.0, 2.0, 4.0),
        queue_size: int = 100,
        queue_bytes: int = 64 * 1024 * 1024,
        max_deliveries: int = 64,
    ) -> None:
        self._store = config_store
        self._policy = policy
        # A callable names the agent's URL for the request that produced the event.
        self._issuer = issuer if callable(issuer) else lambda: issuer
        self._timeout = timeout
        self._delays = tuple(retry_delays)
        self._queue_size = queue_size
        # Events per config are capped, but a 0.3 body is the whole task, and any number
        # of tasks may have configs: only a budget across them all bounds the memory.
        self._queue_bytes = queue_bytes
        #: Bytes of the bodies held now, queued or being delivered (each event counted
        #: once per config it waits for: an upper bound of what they take).
        self.held_bytes = 0
        # One worker per (task, config) and any number of tasks: without a cap on the
        # attempts in flight, stalled receivers could hold every file descriptor.
        self._in_flight = asyncio.Semaphore(max_deliveries)
        # One caller's attempts take at most half of them: its receivers that stall, any
        # number of them, leave slots for the other callers' deliveries.
        self._shares = CallerShares(max(1, max_deliveries // 2))
        #: The caller of each task's latest save (``PushKit.saved``), for its deliveries.
        self.callers: LRUCache[str, str] = LRUCache(maxsize=_SETTLED_TASKS)
        #: The last saved ``Task`` per task id, taken by its event (push/bodies.py).
        self.snapshots: LRUCache[str, Task] = LRUCache(maxsize=1024)
        self._client: Webhooks | None = None
        self._key: SigningKey | None = None
        self._queues: dict[_Key, _Queue] = {}
        self._workers: dict[_Key, asyncio.Task[None]] = {}
        self._closing = False
        self.sent = self.failed = self.retried = self.dropped = 0
        #: Attempts waiting for a delivery slot now (``push_max_deliveries``).
        self.waiting = 0
        #: tasks whose final status this process has queued (bounded: see send_settled)
        self._settled: LRUCache[str, bool] = LRUCache(maxsize=_SETTLED_TASKS)

    def start(self, key: SigningKey) -> None:
        """Begin accepting events, signing them with *key*."""
        self._key = key
        self._closing = False
        if self._client is None:
            self._client = Webhooks(self._timeout)

    async def aclose(self, drain_timeout: float = 10.0) -> None:
        """Stop accepting events; let queued deliveries finish for up to *drain_timeout* s."""
        self._closing = True
        if self._workers:
            _done, pending = await asyncio.wait([*self._workers.values()], timeout=drain_timeout)
            if pending:
                logger.warning("push: shutting down with %d event(s) not delivered", self.pending)
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        self._policy.close()

    @property
    def pending(self) -> int:
        """Events queued or being delivered right now."""
        return sum(len(q) for q in self._queues.values()) + len(self._workers)

    async def idle(self) -> None:
        """Wait until every queued event has been delivered or abandoned."""
        while self._workers:
            await asyncio.gather(*list(self._workers.values()), return_exceptions=True)

    async def send_settled(self, task_id: str, event: TaskStatusUpdateEvent) -> None:
        """Push a task's final *event* written outside a run of this process (a cancel of
        a task another replica runs: that run ends at the stored state without pushing
        it; a task failed because its replica died), unless this process has pushed a
        final status of the task already."""
        if self._key is None:  # not started: a restart's own recovery runs before push
            return
        if task_id not in self._settled:
            await self.send_notification(task_id, event)

    async def send_notification(self, task_id: str, event: PushNotificationEvent) -> None:
        if isinstance(event, TaskStatusUpdateEvent) and event.status.state in _FINAL:
            self._settled[task_id] = True
        snapshot = self.snapshots.pop(task_id, None)
        if self._closing or self._key is None:
            logger.warning("push: sender not running, event for task %s not delivered", task_id)
            return
        try:
            configs, states = await self._store.now(task_id)
        except Exception as exc:  # an outage: the task's run must go on, and say it once
            logger.warning(
                "push: event of task %s not delivered: push configs unreadable (%s)",
                task_id,
                type(exc).__name__,
            )
            return
        # Serialized once per version, now: the body is what each attempt's JWT signs.
        bodies: dict[str, bytes] = {}
        caller = self.callers.get(task_id, "")
        for config in configs:
            config_id = config.id or task_id
            now, failure = states[config_id]
            if failure is not None:  # given up on: nothing more until registered again
                self.dropped += 1
                continue
            if now.version not in bodies:
                v03 = now.version == V0_3
                bodies[now.version] = body_v03(event, snapshot) if v03 else body_v10(event)
            await self._enqueue(task_id, config_id, config, bodies[now.version], caller, now)

    async def _enqueue(
        self,
        task_id: str,
        config_id: str,
        config: TaskPushNotificationConfig,
        body: bytes,
        caller: str,
        aim: Aim,
    ) -> None:
        key = (task_id, config_id)
        old = self._queues.get(key)
        if old is not None and old.aim != aim:
            self.forget(task_id, config_id, aim)  # replaced on another replica
        while True:  # again after each await: another event may have changed the queues
            queue = self._queues.setdefault(key, _Queue())
            if queue.overflowed:
                self.dropped += 1
                return
            if len(queue) >= self._queue_size:
                # The receiver cannot keep up: stop queueing for it rather than grow.
                reason = (
                    f"more than {self._queue_size} events were waiting for this receiver; "
                    "deliveries stopped"
                )
                await self._stop(key, reason)
                return
            if self.held_bytes + len(body) <= self._queue_bytes:
                break
            # Over the budget of all receivers: stop the one holding the most bytes it can
            # give back of the caller holding the most (queued or being delivered), as on
            # an overflow (a receiver that keeps up holds next to none, so slow ones cannot
            # make it fail; nor can one caller's many receivers, each holding less, make
            # another caller's, nor its deliveries waiting for a slot), else this one.
            held: dict[str, int] = {}
            for waiting in self._queues.values():
                held[waiting.caller] = held.get(waiting.caller, 0) + waiting.size + waiting.sending
            most = max(held, key=held.__getitem__)
            mine = (k for k, q in self._queues.items() if q.caller == most)
            heaviest = max(mine, key=lambda k: self._queues[k].stoppable)
            if self._queues[heaviest].stoppable == 0 or heaviest == key:
                reason = (
                    f"the events waiting for push receivers would exceed {self._queue_bytes} "
                    "bytes (push_queue_bytes); deliveries to this receiver stopped"
                )
                await self._stop(key, reason)
                return
            reason = (
                f"the events waiting for push receivers reached {self._queue_bytes} bytes "
                "(push_queue_bytes), the most of them for this receiver; deliveries stopped"
            )
            await self._stop(heaviest, reason, refused=0)
        headers = config_headers(config)
        issuer = self._issuer().rstrip("/")
        queue.push(Delivery(task_id, config_id, config.url, headers, body, issuer, caller), aim)
        self.held_bytes += len(body)
        if key not in self._workers:
            self._workers[key] = asyncio.create_task(
                self._work(key, queue), name=f"a2a-push:{task_id}:{config_id}"
            )

    async def _stop(self, key: _Key, reason: str, *, refused: int = 1) -> None:
        """Drop the queue of *key* (and its *refused* events that did not fit); mark the
        config ``failed``."""
        task_id, config_id = key
        queue = self._queues[key]
        queue.overflowed = True
        self.dropped += len(queue) + refused
        self.held_bytes -= queue.drop()
        worker = self._workers.get(key)
        if queue.sending and not queue.attempting and worker is not None:
            # Its delivery waits (a slot, a retry's pause): it ends now, its bytes too.
            self.dropped += 1
            self.held_bytes -= queue.sending
            queue.sending = 0
            worker.cancel()
        if key not in self._workers:
            # No worker will remove it: an overflowed queue left here would drop the
            # config's events for good, even once it is registered again.
            del self._queues[key]
        # The receiver's trouble, which any caller with push can cause at will: a warning,
        # where operators alert on errors (the config's status names the reason).
        logger.warning("push: config %s of task %s: %s", one_line(config_id), task_id, reason)
        await self._record(key, queue.aim, reason)

    async def _record(self, key: _Key, given_up: Aim, reason: str) -> None:
        """Mark the config failed; the record counts only while it is stored *given_up*."""
        try:
            await self._store.statuses.fail(*key, given_up, reason)
        except Exception as exc:  # an outage: a warning, as for the failure itself
            task_id, config_id, name = *key, type(exc).__name__
            logger.warning(
                "push: config %s of task %s not marked failed (%s)",
                one_line(config_id),
                task_id,
                name,
            )

    def forget(self, task_id: str, config_id: str | None = None, now: Aim | None = None) -> None:
        """Drop the deliveries of a config deleted (of every config of *task_id* for
        ``None``: the task is gone) or stored again with another aim *now* (URL, token,
        credentials, protocol version): its queued events at once, and its POST in flight,
        whose bytes are given back as it ends. The config stored now gets a queue of its
        own."""
        for key in [k for k in self._queues if k[0] == task_id and config_id in (None, k[1])]:
            if self._queues[key].aim == now:
                continue  # stored again as it was: its deliveries go on
            queue = self._queues.pop(key)
            self.dropped += len(queue)
            self.held_bytes -= queue.drop()
            worker = self._workers.pop(key, None)
            if worker is not None:
                worker.cancel()

    async def _work(self, key: _Key, queue: _Queue) -> None:
        try:
            while queue:
                delivery = queue.pop_first()
                try:
                    await self._deliver(delivery, queue)
                except Exception:
                    logger.exception(
                        "push: unexpected error delivering to %s", one_line(delivery.url)
                    )
                finally:
                    self.held_bytes -= queue.sending  # none if _stop gave them back
                    queue.sending = 0
        finally:
            # No await between the emptiness check above and here, so no event can slip
            # into a queue whose worker is gone. A queue left over was canceled (shutdown).
            self.held_bytes -= queue.drop()
            if self._workers.get(key) is asyncio.current_task():  # not a new one (forget)
                del self._workers[key]
            if self._queues.get(key) is queue and not queue:
                del self._queues[key]

    async def _deliver(self, delivery: Delivery, queue: _Queue) -> None:
        task_id, config_id = delivery.task_id, delivery.config_id
        attempts = len(self._delays) + 1
        try:
            for attempt, delay in enumerate([*self._delays, None], 1):
                # A slot per attempt, not per delivery: a retry's pause holds none. The
                # wait for it is outside the attempt's deadline; the config is read once
                # it is had, so one deleted, replaced or failed meanwhile gets nothing.
                problem: str | None
                async with self._slot(delivery.caller):
                    try:
                        if not await self._followed(delivery, queue):
                            return
                    except Exception as exc:  # an outage: a failed attempt, retried as any
                        problem = f"push configs unreadable ({type(exc).__name__})"
                    else:
                        queue.attempting = True
                        try:
                            problem = await try_once(
                                delivery, self._policy, self._client, self._key, self._timeout
                            )
                        finally:
                            queue.attempting = False
                if problem is None:
                    self.sent += 1
                    return
                if delay is None:
                    raise GiveUp(f"{problem} (after {attempts} attempts)")
                self.retried += 1
                logger.warning(
                    "push: delivery to %s for task %s failed (%s); retry %d/%d in %.1f s",
                    one_line(delivery.url),
                    task_id,
                    problem,
                    attempt,
                    attempts - 1,
                    delay,
                )
                await asyncio.sleep(delay)
        except GiveUp as stop:
            self.failed += 1
            logger.warning(  # the receiver's trouble, not the agent's (see _stop)
                "push: giving up on config %s of task %s (%s): %s",
                one_line(config_id),
                task_id,
                one_line(delivery.url),
                stop,
            )
            if not queue.overflowed:  # else the first reason stays: the overflow says more
                # Its later events go nowhere either (those to come are dropped as its
                # failure is read); the record counts only for the aim given up on.
                queue.overflowed = True
                self.dropped += len(queue)
                self.held_bytes -= queue.drop()
                await self._record((task_id, config_id), queue.aim, str(stop))

    async def _followed(self, delivery: Delivery, queue: _Queue) -> bool:
        """Whether the config *queue* posts for is still stored with its aim and not
        failed (one read of the config, its version and its failure); if not (deleted,
        replaced or given up on by another replica, or gone with its task), its
        deliveries end here."""
        _configs, states = await self._store.now(delivery.task_id)
        if states.get(delivery.config_id) == (queue.aim, None):
            return True
        self.dropped += len(queue) + 1
        self.held_bytes -= queue.drop()
        return False

    @contextlib.asynccontextmanager
    async def _slot(self, caller: str) -> AsyncIterator[None]:
        """A slot for one attempt: one of *caller*'s share first, then one of all."""
        self.waiting += 1
        waits = 1
        try:
            with self._shares.of(caller) as share:
                async with share, self._in_flight:
                    self.waiting, waits = self.waiting - 1, 0
                    yield
        finally:
            self.waiting -= waits
