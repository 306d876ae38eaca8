"""The uvicorn behaviour ``apcore_a2a/upstream/host_stops.py`` reads: a serving
``uvicorn.Server`` takes SIGTERM with its bound ``handle_exit``, which sets its public
``should_exit``. A failure here means uvicorn installs its handlers otherwise (or tells the
app of a stop itself): find the stop another way, or delete that file."""

from __future__ import annotations

import signal

import uvicorn

from apcore_a2a.upstream.host_stops import host_stopping


def test_a_serving_uvicorn_takes_sigterm_with_its_bound_handle_exit() -> None:
    server = uvicorn.Server(uvicorn.Config(app=None))
    assert not host_stopping()
    with server.capture_signals():
        handler = signal.getsignal(signal.SIGTERM)
        assert getattr(handler, "__self__", None) is server
        assert not host_stopping()
        server.should_exit = True  # what its handle_exit sets on SIGTERM
        assert host_stopping()
    assert not host_stopping()  # its handlers gone with it
