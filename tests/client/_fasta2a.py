"""A genuine pydantic fasta2a 2.1.1 agent as a separate process, in its own virtualenv.

The virtualenv is built once under ``.cache/interop/fasta2a`` from
``peers/fasta2a-requirements.txt`` (every package pinned), the way tests/interop builds its
peers: under a file lock, again when the pin file changes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests._support import ServerProcess, free_port, wait_http
from tests.interop._envs import PeerUnavailable, unavailable, venv_python

PEERS = Path(__file__).resolve().parent / "peers"
REQUIREMENTS = PEERS / "fasta2a-requirements.txt"


@contextmanager
def fasta2a_agent() -> Iterator[str]:
    """The agent of ``peers/fasta2a_agent.py`` on a free port; yields its URL."""
    try:
        python = venv_python("fasta2a", REQUIREMENTS)
    except PeerUnavailable as exc:
        unavailable(str(exc))
    port = free_port()
    proc = ServerProcess([str(python), str(PEERS / "fasta2a_agent.py"), str(port)])
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(url + "/.well-known/agent-card.json", proc=proc)
        yield url
    finally:  # the peer's exit status is uvicorn's (-15 after SIGTERM), not ours to judge
        proc.terminate()
        proc.wait(timeout=30)
