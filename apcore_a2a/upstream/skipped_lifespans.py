"""The app's lifespan shutdown runs after a second Ctrl-C too.

uvicorn 0.55's ``Server.shutdown`` sends the lifespan its shutdown only ``if not
self.force_exit``: a second SIGINT that comes before that point (two quick Ctrl-Cs, or one
while uvicorn waits for a connection to close) skips it. The app's shutdown is where our
agent closes its task store: skipped, a SQLite database kept its write-ahead log open, a
cluster replica stayed registered as alive (its claims taken) until another replica judged
it dead, a PostgreSQL lock session closed only with the process, and the lifespan's task,
still waiting, was cancelled when the loop ended: a traceback on stderr. The second Ctrl-C
means "stop waiting for running tasks" (``_runner``), which the drain's cancel does; closing
what is open takes no time worth skipping, and ``ExitDeadline`` bounds it still.

uvicorn's lifespan object is its public (undocumented) ``Server.lifespan``, run through its
own ``shutdown()``; whether it ran, its ``shutdown_event``.
"""

from __future__ import annotations

import uvicorn
from uvicorn.lifespan.on import LifespanOn

__all__ = ["finish_lifespan"]


async def finish_lifespan(server: uvicorn.Server) -> None:
    """After ``Server.shutdown``: run the lifespan shutdown uvicorn skipped, if it did."""
    lifespan = getattr(server, "lifespan", None)  # set as serve() begins
    if (
        server.force_exit
        and isinstance(lifespan, LifespanOn)
        # set once the app's shutdown completed or failed, or its lifespan ended
        and not lifespan.shutdown_event.is_set()
    ):
        await lifespan.shutdown()
