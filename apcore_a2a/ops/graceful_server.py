"""The uvicorn server of ``serve()``: it drains running tasks as it stops, and a second
Ctrl-C ends that wait (docs/operations.md, *Exit status of a stop*)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import uvicorn

from apcore_a2a.ops.ctrl_c import CtrlCs
from apcore_a2a.ops.exit_deadline import ExitDeadline
from apcore_a2a.ops.shutdown import drain, last_events
from apcore_a2a.ops.stream_ends import StreamEnds
from apcore_a2a.settings import Settings
from apcore_a2a.upstream.skipped_lifespans import finish_lifespan
from apcore_a2a.upstream.stalled_connections import peer, stalled, unread

logger = logging.getLogger("apcore_a2a")

#: Seconds the connections still open when the drain has ended get to close (a stream
#: sends the last event of its task; the others were ended then: ops/stream_ends.py). A
#: connection whose client has read none of what waits for it all that time is cut.
STREAM_DELIVERY = 3.0
#: Seconds between two looks at what the open connections' clients have not read.
_LOOK_EVERY = 0.1


class GracefulServer(uvicorn.Server):
    """Drains running tasks before uvicorn's wait for open connections: the lifespan
    shutdown comes too late (a returnImmediately task holds no connection; a stream would
    be cut before its ``canceled`` event), and the wait only then (a stream gets its last
    event however long the drain's cancels take; the streams no task's end reaches are
    ended then, as complete responses: ``ops/stream_ends.py``). *deadline* is armed as the
    stop begins, and a third Ctrl-C ends the process at once through it; *on_started* runs
    once it serves."""

    def __init__(
        self,
        config: uvicorn.Config,
        app: Any,
        settings: Settings,
        deadline: ExitDeadline | None,
        on_started: Callable[[], None] | None,
        worker: bool = False,
    ) -> None:
        #: the app's SSE responses, which the stop ends once the drain has
        served: Any = config.app  # the ASGI app (runner.py), not an import string
        self.streams = StreamEnds(served)
        config.app = self.streams
        super().__init__(config)
        #: A worker of ``--workers`` leaves a third Ctrl-C to its parent: a terminal's
        #: Ctrl-C reaches it both directly and forwarded, so it cannot count them.
        self.worker = worker
        self.app, self.settings = app, settings
        self.deadline, self.on_started = deadline, on_started
        #: A second Ctrl-C left tasks running: the stop was not graceful.
        self.abandoned = False
        #: The loop that stops, and its event for a second Ctrl-C (uvicorn's force_exit).
        self.stopping: asyncio.AbstractEventLoop | None = None
        self.forced = asyncio.Event()
        self.replaying = False
        self.ctrl_cs = CtrlCs()
        #: how long after the stop began open connections may take (uvicorn's bound)
        self.connection_bound = config.timeout_graceful_shutdown

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        if self.started and not sockets:
            logger.info("Serving A2A agent at %s", self.settings.public_url())
        if self.started and self.on_started is not None:
            self.on_started()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        with super().capture_signals():
            # uvicorn's handlers are in place: what the thread that reads senders does
            # not take (ops/ctrl_c.py) reaches them
            with self.ctrl_cs.taking(self.take_signal):
                yield
            # uvicorn hands back the signals it took as it leaves: not a third Ctrl-C
            self.replaying = True
        self.replaying = False

    def handle_exit(self, sig: int, frame: Any) -> None:
        if sig == signal.SIGINT and not self.replaying and self.ctrl_cs.echo():
            return  # the Ctrl-C just counted, delivered again (the group's, a wrapper's)
        self.take_signal(sig, frame)

    def take_signal(self, sig: int, frame: Any) -> None:
        """A stop signal, not the forward of one already taken (a Ctrl-C's)."""
        # A third Ctrl-C: what the stop still waits for (a module that swallows its cancel,
        # a frozen database as the store closes) would hold it until the exit deadline.
        # serve() owns the process, unless shutdown_force_timeout is 0 (no deadline).
        third = self.force_exit and sig == signal.SIGINT and not self.replaying
        if third and self.deadline and not self.worker:
            words = "Third Ctrl-C: exiting at once, abandoning %s (the stop waited on %s)"
            self.deadline.exit_soon(words, frame)
        super().handle_exit(sig, frame)
        if self.force_exit and self.stopping is not None:
            # A signal handler runs between two bytecodes of the loop, which may sleep in
            # its selector: the threadsafe call sets the event and wakes it.
            with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
                self.stopping.call_soon_threadsafe(self.forced.set)

    async def shutdown(self, sockets: Any = None) -> None:
        state = self.app.state.a2a  # the factory's apps all have it
        self.stopping = asyncio.get_running_loop()
        if self.deadline is not None:
            self.deadline.arm()
        begun = time.monotonic()
        draining = asyncio.ensure_future(drain(state, state.settings.shutdown_timeout))
        forced = asyncio.ensure_future(self._forced(state))
        try:
            # No new connection, nor a new request on a kept one, while the drain runs
            # (uvicorn's shutdown below does the same again).
            for server in self.servers:
                server.close()
            for sock in sockets or []:
                sock.close()
            for connection in list(self.server_state.connections):
                connection.shutdown()
            # The drain first: once it has ended, the final state of every task it canceled
            # is stored, and so on its way to the task's streams. Only then does uvicorn's
            # wait for open connections begin: a busy machine delays a stream's last
            # event, and no clock cuts the stream before it (the streams' own grace is
            # unbounded under serve(): server/factory.py).
            await asyncio.wait([draining])
            # Every stream ends as a complete response: now, or once it has sent the last
            # event the drain saw its task's store take (on its way to it).
            self.streams.end(last_events(state))
            if self.connection_bound is not None:
                # uvicorn's bound comes after the cuts: at it, it cancels the app's tasks
                # (ERROR lines with tracebacks), and a stalled transport stays open even so.
                left = begun + self.connection_bound - time.monotonic()
                bound = max(STREAM_DELIVERY + 1, left)
                self.config.timeout_graceful_shutdown = math.ceil(bound)
            cutting = asyncio.ensure_future(self._cut_stalled())
            try:
                # The lifespan's shutdown waits for this same drain before it closes the store.
                await super().shutdown(sockets)
            finally:
                cutting.cancel()
            # ...unless uvicorn skipped it (a second Ctrl-C came first): it closes the
            # stores all the same.
            await finish_lifespan(self)
        finally:
            if not self.force_exit:
                forced.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await forced  # after a second Ctrl-C: it has ended the drain, or does now
            # What is left of the drain (this stop cancelled itself) ends here.
            for task in (draining, state.ops.draining):
                if task is not None and not task.done():
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task

    async def _forced(self, state: Any) -> None:
        """A second Ctrl-C ends the drain, also once the lifespan waits for it."""
        if not self.force_exit:
            await self.forced.wait()
        draining = state.ops.draining
        if draining is not None and not draining.done():
            running = state.ops.tracker.active
            self.abandoned = bool(running)  # then the process exits 1, not 0
            if running:
                logger.warning(
                    "Second Ctrl-C: the stop waits no longer for %d running task(s); %s",
                    running,
                    state.stores.left_behind("them"),
                )
            draining.cancel()

    async def _cut_stalled(self) -> None:
        """Cut each connection whose client has taken none of the bytes waiting for it
        for :data:`STREAM_DELIVERY` seconds after the drain (a client that stopped reading
        without closing: its stream's last event, or its response's end, cannot go), with
        one WARNING line; uvicorn would wait for it until its bound
        (``upstream/stalled_connections.py``). A slow client still reading is not cut."""
        #: per transport: since when the bytes its client has not taken have not changed,
        #: and how many they are. A client that reads moves them (the app may refill what
        #: it took); one that does not, never: the app's send waits once they pass
        #: uvicorn's high-water mark.
        waiting: dict[asyncio.WriteTransport, tuple[float, int]] = {}
        cut: set[asyncio.WriteTransport] = set()  # until uvicorn hears of its loss
        try:
            while True:
                now = time.monotonic()
                seen = set(stalled(self)) - cut
                for transport in seen:
                    left = unread(transport)
                    since, before = waiting.get(transport, (now, left))
                    since = now if left != before else since
                    waiting[transport] = (since, left)
                    if now - since >= STREAM_DELIVERY:
                        logger.warning(
                            "Shutting down: cut the connection of %s, whose client has not "
                            "read what was sent to it for %.1f s (a client that stopped "
                            "reading)",
                            peer(transport),
                            STREAM_DELIVERY,
                        )
                        transport.abort()
                        cut.add(transport)
                for transport in set(waiting) - seen:
                    del waiting[transport]  # it read them, or is gone
                await asyncio.sleep(_LOOK_EVERY)
        except Exception:  # uvicorn's bound still ends the wait
            logger.exception("Shutting down: the connections could not be looked at")
