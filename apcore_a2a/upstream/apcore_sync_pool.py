"""A module with a plain ``def execute`` runs on the agent's own threads.

Upstream (apcore 0.32.2, ``BuiltinExecute``): a sync module runs through
``loop.run_in_executor(None, ...)``, on the event loop's default executor, which belongs to
whoever runs the loop (a host app mounting the agent) and is sized for it. So the execute
step of our runs (``execution/runs.py``) is handed a view of such a module whose async
``execute`` runs it on the agent's pool of ``sync_workers`` threads. Deletable when apcore
takes an executor for sync modules: ``tests/upstream/test_apcore_sync_pool.py`` fails then.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any


@dataclass(slots=True, eq=False)
class PooledModule:
    """*module* (with a plain ``def execute``) as apcore's execute step sees it in our runs:
    an async ``execute`` on *pool*."""

    module: Any
    pool: Executor

    async def execute(self, inputs: Any, context: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, self.module.execute, inputs, context)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.module, name)
