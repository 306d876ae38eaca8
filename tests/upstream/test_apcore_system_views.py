"""The apcore behaviour ``apcore_a2a/upstream/apcore_system_views.py`` answers: apcore's
read-only system modules answer about every registered module, to whoever calls them. A
failure here means apcore scopes them to what a caller may see: delete that file and its
call."""

from __future__ import annotations

from apcore import APCore, Config

from apcore_a2a.upstream.apcore_system_views import call_seen


async def test_system_modules_answer_about_every_module_to_any_caller() -> None:
    config = {"sys_modules": {"enabled": True, "events": {"enabled": True}}}
    client = APCore(config=Config(data=config))
    call = client.executor.call_async
    manifest = await call("system.manifest.full", {})
    listed = {m["module_id"] for m in manifest["modules"]}
    assert "system.control.toggle_feature" in listed
    health = await call("system.health.module", {"module_id": "system.control.update_config"})
    assert health["module_id"] == "system.control.update_config"
    # Ours, for a caller who may see the manifest only: that one module, no other.
    seen = await call_seen(call, "system.manifest.full", {}, None, "system.manifest.full".__eq__)
    assert [m["module_id"] for m in seen["modules"]] == ["system.manifest.full"]
