"""Watch: a2a-sdk's 0.3 REST streams answer a bad body with ``200`` and a cut stream.

``apcore_a2a.upstream.rest03_streams`` answers such errors before the stream starts. The
day the SDK does so itself, the first test fails and the correction can go.
"""

from __future__ import annotations

import httpx
from a2a.server.routes import create_rest_routes
from starlette.applications import Starlette
from starlette.routing import Route

from apcore_a2a.upstream.rest03_streams import eager_streams

BAD = b"{not json"
HEADERS = {"Content-Type": "application/json", "A2A-Version": "0.3"}


async def _post(app: Starlette) -> httpx.Response:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://agent") as http:
        return await http.post("/v1/message:stream", content=BAD, headers=HEADERS)


async def test_the_sdk_answers_a_bad_0_3_stream_body_with_200() -> None:
    routes = create_rest_routes(object(), enable_v0_3_compat=True)  # type: ignore[arg-type]
    response = await _post(Starlette(routes=routes))
    assert response.status_code == 200  # the error, if any, comes inside the stream


async def test_the_correction_answers_it_before_the_stream() -> None:
    endpoint = eager_streams(object(), None, 0)["/v1/message:stream"]
    app = Starlette(routes=[Route("/v1/message:stream", endpoint, methods=["POST"])])
    response = await _post(app)
    assert response.status_code == 400
    assert "text/event-stream" not in response.headers.get("content-type", "")
