"""The base install (no extras) serves: optional packages are imported only when used."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests._support import ROOT

OPTIONAL = ["grpc", "prometheus_client", "asyncpg", "opentelemetry.instrumentation", "playwright"]

SCRIPT = textwrap.dedent(
    """
    import importlib.abc, sys

    BLOCKED = {blocked!r}

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if any(name == b or name.startswith(b + ".") for b in BLOCKED):
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None

    sys.meta_path.insert(0, Block())
    sys.path.insert(0, {root!r})

    import asyncio
    import httpx
    from apcore_a2a import async_serve
    from tests.foundation.modules import build_registry

    async def main():
        app = async_serve(build_registry(), environ={{}}, task_store="sqlite:///:memory:")
        transport = httpx.ASGITransport(app=app)
        async with app.router.lifespan_context(app):
            async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:
                body = {{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {{
                    "message": {{"messageId": "m", "role": "ROLE_USER",
                                "parts": [{{"data": {{"a": 2, "b": 40}}}}],
                                "metadata": {{"skillId": "math.add"}}}}}}}}
                reply = (await c.post("/", json=body, headers={{"A2A-Version": "1.0"}})).json()
                print(reply["result"]["task"]["artifacts"][0]["parts"][0]["data"]["sum"])
                print((await c.get("/health")).status_code)
        print(sorted(m for m in sys.modules if m.split(".")[0] in {{"grpc", "prometheus_client", "asyncpg"}}))

    asyncio.run(main())
    """
)


def test_serves_without_optional_packages() -> None:
    code = SCRIPT.format(blocked=OPTIONAL, root=str(ROOT))
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr[-3000:]
    total, health, loaded = result.stdout.split()
    assert (float(total), health, loaded) == (42, "200", "[]")


def test_features_name_their_missing_extra() -> None:
    script = textwrap.dedent(
        f"""
        import importlib.abc, sys
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("grpc", "prometheus_client"):
                    raise ModuleNotFoundError(name, name=name)
        sys.meta_path.insert(0, Block())
        sys.path.insert(0, {str(ROOT)!r})
        from apcore_a2a import A2AServerFactory
        from tests.foundation.modules import build_registry
        for extra in ({{"grpc_port": 50051}}, {{"metrics": True}}):
            try:
                A2AServerFactory(build_registry(), environ={{}}, **extra).create()
            except Exception as exc:
                print(type(exc).__name__, str(exc))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 2, result.stdout + result.stderr[-2000:]
    assert "apcore-a2a[grpc]" in lines[0]
    assert "apcore-a2a[metrics]" in lines[1]
