"""``serve()`` and ``async_serve()``: resolve inputs, then run or return the app.

Only :mod:`apcore_a2a.server.factory` knows how the pieces are wired; this module turns
the caller's arguments into settings and runs the app (``_runner``: uvicorn with graceful
shutdown; ``_workers``: several processes).
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.applications import Starlette

from apcore_a2a._runner import StartupError, run_app
from apcore_a2a.server.factory import A2AServerFactory

__all__ = ["StartupError", "async_serve", "serve"]

logger = logging.getLogger("apcore_a2a")


def async_serve(registry_or_executor: Any = None, **kwargs: Any) -> Starlette:
    """Build the agent as a Starlette (ASGI) app to mount or run yourself.

    Takes the same keyword arguments as :func:`serve`. Example::

        app = async_serve(registry, name="calc")
        # uvicorn.run(app) or Mount("/agent", app=app)
    """
    app, _card = A2AServerFactory(registry_or_executor, **kwargs).create()
    return app


def serve(registry_or_executor: Any = None, **kwargs: Any) -> None:
    """Serve an apcore Registry or Executor as an A2A agent (blocks until stopped).

    Keyword arguments are the fields of :class:`~apcore_a2a.settings.Settings` (``host``,
    ``port``, ``name``, ``url``, ``default_skill``, ``execution_timeout``,
    ``shutdown_timeout``, ``workers``...), plus ``task_store`` (URL or TaskStore), ``auth``
    (Authenticator) and ``config`` (an agent YAML file; keyword arguments and environment
    variables win over it; with no registry given, the file's modules are served:
    ``serve(config="agent.yaml")``). SIGINT/SIGTERM stop the server gracefully within
    ``shutdown_timeout``.

    Example::

        from apcore import Registry
        from apcore_a2a import serve

        registry = Registry(extensions_dir="./extensions")
        registry.discover()
        serve(registry, port=8000)
    """
    factory = A2AServerFactory(registry_or_executor, standalone=True, **kwargs)
    if factory.settings.workers > 1:
        from apcore_a2a._workers import run_workers

        code = run_workers(factory)
        if code:
            raise SystemExit(code)
        return
    app, _card = factory.create()
    run_app(app, factory.settings)
