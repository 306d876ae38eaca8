"""The webhook every peer registers: it keeps each delivery (headers and exact body) per run.

``POST /hook/{run}`` stores a delivery; ``GET /received/{run}`` lists the parsed bodies so a
peer can wait for the delivery it expects; the test reads :attr:`Webhook.deliveries`.
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


@dataclass(frozen=True)
class Delivery:
    url: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Webhook:
    """Thread-safe store of deliveries; :meth:`app` is the receiving Starlette app."""

    _lock: threading.Lock = field(default_factory=threading.Lock)
    _runs: dict[str, list[Delivery]] = field(default_factory=lambda: defaultdict(list))

    def deliveries(self, run: str) -> list[Delivery]:
        with self._lock:
            return list(self._runs.get(run, ()))

    def app(self) -> Starlette:
        async def hook(request: Request) -> Response:
            body = await request.body()
            delivery = Delivery(str(request.url), dict(request.headers), body)
            with self._lock:
                self._runs[request.path_params["run"]].append(delivery)
            return Response(status_code=204)

        async def received(request: Request) -> Response:
            bodies = []
            for delivery in self.deliveries(request.path_params["run"]):
                try:
                    bodies.append(delivery.json())
                except ValueError:
                    bodies.append(None)
            return JSONResponse(bodies)

        return Starlette(
            routes=[
                Route("/hook/{run}", hook, methods=["POST"]),
                Route("/received/{run}", received, methods=["GET"]),
            ]
        )
