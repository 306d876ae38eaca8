"""Task storage: bounded memory, SQLite, PostgreSQL, and multi-replica (cluster) mode.

Example::

    stores = open_stores("sqlite:///tasks.db", settings)
    await stores.start()
    handler = DefaultRequestHandler(..., task_store=stores.task_store,
                                    push_config_store=stores.push_config_store,
                                    event_stream=stores.event_stream)
"""

from ._sql_backend import INTERRUPTED_MESSAGE
from ._urls import StoreInUseError, StoreUnavailableError
from .memory import BoundedMemoryTaskStore
from .stores import Stores, open_stores

__all__ = [
    "INTERRUPTED_MESSAGE",
    "BoundedMemoryTaskStore",
    "StoreInUseError",
    "StoreUnavailableError",
    "Stores",
    "open_stores",
]
