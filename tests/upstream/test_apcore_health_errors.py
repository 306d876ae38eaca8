"""The apcore behaviour ``apcore_a2a/upstream/apcore_system_views.py`` answers with
:func:`without_error_texts`: apcore's health modules answer the text of other calls' errors
to whoever calls them. A failure here means apcore keeps them from callers now: delete that
function and its call."""

from __future__ import annotations

import pytest
from apcore import APCore, Config
from apcore.decorator import module

from apcore_a2a.upstream.apcore_system_views import HIDDEN, without_error_texts


async def test_health_modules_answer_the_text_of_other_calls_errors() -> None:
    client = APCore(config=Config(data={"sys_modules": {"enabled": True}}))

    @module(id="demo.pay", description="Pay", registry=client.registry)
    def pay(card: str) -> str:
        raise ValueError(f"card {card} declined")

    with pytest.raises(Exception, match="4111"):
        await client.executor.call_async("demo.pay", {"card": "4111"})
    call = client.executor.call_async
    summary = await call("system.health.summary", {})
    detail = await call("system.health.module", {"module_id": "demo.pay"})
    top = next(m["top_error"] for m in summary["modules"] if m["module_id"] == "demo.pay")
    assert "card 4111 declined" in top["message"]
    assert "card 4111 declined" in detail["recent_errors"][0]["message"]
    shown = without_error_texts("system.health.module", detail)
    assert shown["recent_errors"][0]["message"] == HIDDEN
