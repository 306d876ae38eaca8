"""The uvicorn behaviour ``apcore_a2a/upstream/uvicorn_signals.py`` answers: after a
graceful stop on SIGTERM it hands the signal back to the default handler, which ends the
process with -15. A failure here means uvicorn exits cleanly by itself: delete that file.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import httpx

from tests._support import TLS, free_port

_APP = """
import sys, uvicorn
async def app(scope, receive, send):
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", lifespan="off")
"""


def test_uvicorn_ends_a_graceful_stop_with_the_signal() -> None:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", _APP, str(port)])
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=1, verify=TLS)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == -signal.SIGTERM
