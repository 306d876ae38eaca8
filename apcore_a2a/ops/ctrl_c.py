"""One Ctrl-C counts once, however many times it is delivered (docs/operations.md, *One
Ctrl-C, delivered twice*).

A terminal sends Ctrl-C to its whole process group, and a wrapper in that group (``uv
run``, ``npm exec``, a shell script's ``trap``) forwards it to its child again, some time
later: milliseconds, or more than 100 ms on a loaded host. Counted twice, one Ctrl-C
abandoned the running tasks. What tells the forward from a person's next Ctrl-C is who
sent it, which a Python signal handler is not told: while ``serve()`` runs (main thread,
Linux), SIGINT and SIGTERM are held in every thread of the process and one thread of ours
takes them with ``sigwaitinfo``, which reads the sender. Where that cannot be (another
platform, a thread of the host's that does not hold them), a SIGINT within :data:`ECHO`
of the last one counted is taken for it, as before.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

logger = logging.getLogger("apcore_a2a")

#: Seconds within which a SIGINT of unknown sender repeats the Ctrl-C last counted; a
#: person's next Ctrl-C comes later, and one held down repeats every 30-40 ms.
ECHO = 0.1
#: Seconds after the last Ctrl-C counted that a stop which ended first waits for its
#: forward, when one is due (the parent in our process group, the Ctrl-C another's):
#: later, it meets the handler the host had (Python's ``KeyboardInterrupt``, status -2).
FORWARD_WAIT = 1.0
#: The signals the thread takes: the stops, in the order they were sent (a worker's
#: Ctrl-C from the terminal comes before the SIGTERM its parent forwards).
STOPS = (signal.SIGINT, signal.SIGTERM)
#: Their bits in a thread's mask (``SigBlk`` of ``/proc/self/task/*/status``).
_BITS = sum(1 << (sig - 1) for sig in STOPS)
_SIGBLK = re.compile(r"^SigBlk:\s*([0-9a-f]+)$", re.M)

Act = Callable[[int, FrameType | None], None]


class CtrlCs:
    """Tells a person's Ctrl-C from the same one delivered again.

    The rule, by sender: a SIGINT from anyone but our parent process (the terminal, which
    the kernel sends, or a process signalling the group) while the parent is in our
    process group is a Ctrl-C the parent may forward; the next SIGINT or SIGTERM the
    parent sends is that forward (a wrapper forwards it as it came, the parent of
    ``--workers`` as SIGTERM the first time), a SIGINT so not counted again. Every other
    SIGINT is a new Ctrl-C, whenever it comes."""

    def __init__(self) -> None:
        self._counted = -math.inf
        #: Ctrl-Cs counted whose forward by our parent may still come
        self._due = 0
        self._forwarded = threading.Condition()
        self._taking = self._leaving = False

    def echo(self) -> bool:
        """Whether a SIGINT of unknown sender handled now repeats the last one counted
        (else it counts)."""
        now = time.monotonic()
        if now - self._counted < ECHO:
            return True
        self._counted = now
        return False

    def judged(self, act: Act) -> Act:
        """A signal handler that hands *act* the stops but a SIGINT :meth:`echo` takes for
        the last Ctrl-C (its sender is unknown: not taken by :meth:`taking`'s thread)."""

        def handle(signum: int, frame: FrameType | None) -> None:
            if signum != signal.SIGINT or not self.echo():
                act(signum, frame)

        return handle

    def forward(self, signum: int, code: int, sender: int) -> bool:
        """Whether a signal *sender* sent (``si_code`` *code*) is the forward of a Ctrl-C
        counted, and so no new one (a SIGTERM still stops)."""
        parent = os.getppid()
        with self._forwarded:
            if code <= 0 and sender == parent and self._due:  # sent by a process: our parent
                self._due -= 1
                self._forwarded.notify_all()
                return signum == signal.SIGINT
            if signum == signal.SIGINT:
                self._counted = time.monotonic()
                if sender not in (parent, os.getpid()) and _grouped(parent):
                    self._due += 1
        return False

    def settle(self) -> None:
        """Wait for the forward of the last Ctrl-C counted, if one is due (at most
        :data:`FORWARD_WAIT` after it; by time, :data:`ECHO`): it then meets the handler
        that knows it, not the one restored after it."""
        if not self._taking:
            time.sleep(max(0.0, self._counted + ECHO - time.monotonic()))
            return
        left = self._counted + FORWARD_WAIT - time.monotonic()
        with self._forwarded:
            self._forwarded.wait_for(lambda: not self._due, max(0.0, left))

    @contextlib.contextmanager
    def taking(self, act: Act) -> Iterator[None]:
        """While in it, SIGINT and SIGTERM reach *act* from a thread of ours that knows who
        sent them, a forward left out (:meth:`forward`); where it cannot, they reach the
        handlers in place, which judge a SIGINT by :meth:`echo`. Then the main thread's
        signal mask is as it was, after :meth:`settle`."""
        held = _hold()
        if held is None:
            try:
                yield
            finally:
                self.settle()
            return
        taker = threading.Thread(target=self._take, args=(act,), name="apcore-a2a-signals")
        taker.daemon, self._taking = True, True
        taker.start()
        try:
            yield
        finally:
            self.settle()
            self._leaving = True
            if taker.is_alive():  # (the id of a thread that ended may be another's)
                signal.pthread_kill(taker.ident or 0, signal.SIGINT)
            taker.join()
            self._taking = self._leaving = False
            # One sent meanwhile meets the handler in place, judged by echo()
            signal.pthread_sigmask(signal.SIG_SETMASK, held)

    def _take(self, act: Act) -> None:
        me = os.getpid()
        got: signal.struct_siginfo | None
        while True:
            got = signal.sigwaitinfo(STOPS)
            if self._leaving and got.si_pid == me:
                break  # taking() ends
            self._judge(got, act)
        # What the process was sent meanwhile is still judged by its sender (it would meet
        # the handler in place, which cannot tell a forward)
        while (got := signal.sigtimedwait(STOPS, 0)) is not None:
            self._judge(got, act)

    def _judge(self, got: signal.struct_siginfo, act: Act) -> None:
        try:
            if not self.forward(got.si_signo, got.si_code, got.si_pid):
                act(got.si_signo, None)
        except Exception:  # this thread alone takes the stops: it must live on
            logger.exception("handling signal %d failed", got.si_signo)


def _hold() -> set[int | signal.Signals] | None:
    """Hold the stops in the main thread, and return its mask before, when every other
    thread holds them too (it and those it starts then do: this process's stops wait for
    ``sigwaitinfo``); else None, and the mask is as it was."""
    if (
        not sys.platform.startswith("linux")
        or not hasattr(signal, "sigwaitinfo")
        or threading.current_thread() is not threading.main_thread()
    ):
        return None
    held = signal.pthread_sigmask(signal.SIG_BLOCK, STOPS)
    if set(STOPS) & held or not _others_hold():  # the host's own use of them
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        return None
    return held


def _others_hold() -> bool:
    me = threading.get_native_id()
    try:
        tasks = [int(task) for task in os.listdir("/proc/self/task")]
    except OSError:
        return False
    for task in tasks:
        if task == me:
            continue
        try:
            status = Path(f"/proc/self/task/{task}/status").read_text()
        except FileNotFoundError:  # the thread ended
            continue
        except OSError:
            return False
        found = _SIGBLK.search(status)
        if found is None or int(found.group(1), 16) & _BITS != _BITS:
            return False
    return True


def _grouped(pid: int) -> bool:
    """Whether process *pid* is in our process group (and so got the terminal's Ctrl-C)."""
    try:
        return pid > 0 and os.getpgid(pid) == os.getpgrp()
    except OSError:
        return False
