"""A module with a plain ``def execute`` runs on the agent's ``sync_workers`` pool, not on
the host loop's default executor.
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
