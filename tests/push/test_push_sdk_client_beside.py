"""An a2a-sdk client beside our agent in one process, speaking gRPC 0.3 to it, gets 0.3
deliveries (``apcore_a2a/upstream/client_first.py``): serving the agent first once left
a2a-sdk's ``ClientFactory`` without its 0.3 gRPC transport, so its calls reached the 1.0
service and the webhook it registered got 1.0's shape."""

from __future__ import annotations

import json
import subprocess
import sys

from tests._support import ROOT


def test_a_webhook_registered_over_grpc_0_3_from_the_same_process_gets_0_3_bodies() -> None:
    # A fresh interpreter: the subject is what the process imported, and in what order.
    run = [sys.executable, "-m", "tests.push._sdk_client_beside"]
    done = subprocess.run(run, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-800:]
    keys = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("[")]
    assert keys, done.stdout[-800:]
    # 0.3: the whole task every time ({"kind": "task", "id": ...}); 1.0 would be one
    # of "task", "statusUpdate", "artifactUpdate" alone.
    assert all({"kind", "id", "status", "contextId"} <= set(k) for k in keys), keys
