"""apcore's control plane is no open door (issue 40 item 2).

An ``APCore`` client with ``sys_modules`` and events on registers nine ``system.*`` modules
beside the user's. None is a skill unless the operator names it; a control module
(``system.control.*``) only behind authentication, for callers with the operator role,
and under apcore's approval gate. Before: all nine on the card, and an anonymous
``SendMessage`` to ``system.control.toggle_feature`` disabled ``demo.echo``.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from apcore import ACL, ACLRule, Context, Executor
from apcore.decorator import module

from apcore_a2a import A2AServerFactory, Settings
from apcore_a2a.config import load_config
from apcore_a2a.settings import SettingsError
from tests._support import TLS, cli, cli_server, free_port

from ._agent import KEYS, OPS, TOGGLE, USER, V1, apcore_client, call, send, served, skills, toggle

READ_ONLY = ("system.health.summary", "system.manifest.full")


def _text(answer: dict[str, Any]) -> Any:
    return answer["result"]["task"]["artifacts"][0]["parts"][0]["text"]


async def test_no_system_skill_by_default_and_the_control_plane_is_unknown() -> None:
    client = apcore_client()
    assert len([m for m in client.registry.list() if m.startswith("system.")]) == 9
    async with served(client.executor) as http:
        assert await skills(http) == ["demo.echo"]
        refused = await call(http, TOGGLE, toggle(False))
        unknown = await call(http, "nope.nope", toggle(False))
        assert refused["error"]["code"] == unknown["error"]["code"] == -32601
        assert refused["error"]["message"] == f"Skill not found: {TOGGLE}"
        assert refused["error"]["data"] == unknown["error"]["data"]
        # REST answers both alike too.
        rest = []
        for skill in (TOGGLE, "nope.nope"):
            body = send(skill, toggle(False))["params"]
            answer = await http.post("/message:send", json=body, headers=V1)
            rest.append((answer.status_code, answer.json()["error"]["status"]))
        assert rest[0] == rest[1] == (404, "NOT_FOUND")
        # The other skill still works: nothing was toggled.
        assert _text(await call(http, "demo.echo", {"text": "hi"})) == "hi"
        assert _text(await call(http, "demo.echo", {"text": "again"})) == "again"


async def test_named_read_only_system_modules_are_served() -> None:
    client = apcore_client()
    async with served(client.executor, system_modules=READ_ONLY) as http:
        assert await skills(http) == ["demo.echo", *READ_ONLY]
        manifest = await call(http, "system.manifest.full", {})
        data = manifest["result"]["task"]["artifacts"][0]["parts"][0]["data"]
        assert "demo.echo" in [m["module_id"] for m in data["modules"]]
        # One not named stays unknown.
        other = await call(http, "system.usage.summary", {})
        assert other["error"]["code"] == -32601


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("demo.echo", "'demo.echo' is not one of apcore's system modules"),
        ("system.health.summry", "'system.health.summry' is not registered"),
    ],
)
def test_a_name_that_is_no_registered_system_module_is_refused(name: str, said: str) -> None:
    with pytest.raises(SettingsError) as refused:
        A2AServerFactory(apcore_client().executor, environ={}, system_modules=[name]).create()
    assert said in str(refused.value) and "\n" not in str(refused.value)


def test_a_control_module_needs_authentication() -> None:
    with pytest.raises(SettingsError) as refused:
        A2AServerFactory(apcore_client().executor, environ={}, system_modules=[TOGGLE]).create()
    message = str(refused.value)
    assert message.startswith(f"system_modules: {TOGGLE} is one of apcore's control modules")
    assert "only with authentication" in message and "'operator' role" in message


def test_a_control_module_needs_apcore_approval_gate() -> None:
    # A strategy without apcore's approval gate: governance_state() calls the control
    # surface unprotected, and the agent refuses to serve it.
    client = apcore_client()
    executor = Executor(client.registry, strategy="internal")
    assert executor.governance_state().unprotected_control_surface
    factory = A2AServerFactory(executor, environ={}, api_keys=KEYS, system_modules=[TOGGLE])
    with pytest.raises(SettingsError) as refused:
        factory.create()
    assert str(refused.value) == (
        f"system_modules: {TOGGLE} is one of apcore's control modules, and apcore's approval "
        "gate does not protect the control plane (governance_state(): "
        "unprotected_control_surface True, approval gate wired False): refusing to serve it"
    )


@pytest.mark.parametrize("control", [TOGGLE, "system.control.update_config"])
def test_a_control_module_is_not_served_by_several_processes(control: str, tmp_path: Path) -> None:
    # apcore keeps toggles, config and loaded modules in the memory of the process that
    # runs the call: with replicas (cluster mode, --workers N) an operator's "disable
    # demo.echo" disabled it on one of them, the others serving it on.
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    factory = A2AServerFactory(
        apcore_client().executor,
        environ={},
        api_keys=KEYS,
        system_modules=[control],
        cluster=True,
        task_store=store,
    )
    with pytest.raises(SettingsError) as refused:
        factory.create()
    assert str(refused.value) == (
        f"system_modules: {control} is one of apcore's control modules: it changes only the "
        "process that runs it (apcore keeps toggles, config and modules in its memory), and "
        "in cluster mode other processes serve the same agent: refusing to serve it"
    )


async def test_a_control_module_is_for_operators_and_asks_for_approval() -> None:
    client = apcore_client()
    async with served(client.executor, api_keys=KEYS, system_modules=[TOGGLE]) as http:
        assert await skills(http) == ["demo.echo"]  # the public card: anonymous callers
        extended = {"jsonrpc": "2.0", "id": 2, "method": "GetExtendedAgentCard", "params": {}}
        for key, listed in ((USER, ["demo.echo"]), (OPS, ["demo.echo", TOGGLE])):
            card = (await http.post("/", json=extended, headers={**V1, **key})).json()
            assert [s["id"] for s in card["result"]["skills"]] == listed
        # Not an operator: the same answer as for a skill that does not exist.
        refused = await call(http, TOGGLE, toggle(False), **USER)
        assert (refused["error"]["code"], refused["error"]["message"]) == (
            -32601,
            f"Skill not found: {TOGGLE}",
        )
        # An operator is asked for approval first; nothing changes before it.
        parked = (await call(http, TOGGLE, toggle(False), **OPS))["result"]["task"]
        assert parked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert parked["status"]["message"]["parts"][1]["data"]["code"] == "APPROVAL_PENDING"
        assert _text(await call(http, "demo.echo", {"text": "hi"}, **USER)) == "hi"
        approve = send(None, {"approved": True}, taskId=parked["id"])
        done = (await http.post("/", json=approve, headers={**V1, **OPS})).json()
        assert done["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        disabled = await call(http, "demo.echo", {"text": "hi"}, **USER)
        assert disabled["error"]["message"] == "Skill is disabled: demo.echo"


def test_the_setting_comes_from_env_and_the_config_file(tmp_path: Path) -> None:
    env = Settings.resolve(
        environ={"A2A_SYSTEM_MODULES": "system.health.summary,system.usage.summary"}
    )
    assert env.system_modules == ("system.health.summary", "system.usage.summary")
    agent = tmp_path / "agent.yaml"
    agent.write_text("modules:\n  system_modules: [system.manifest.full]\n", encoding="utf-8")
    assert load_config(agent).base().system_modules == ("system.manifest.full",)


def _apcore_yaml(tmp_path: Path) -> str:
    path = tmp_path / f"apcore-{uuid.uuid4().hex}.yaml"
    path.write_text(
        'version: "1.0"\nproject:\n  name: governed\n'
        "sys_modules:\n  enabled: true\n  events:\n    enabled: true\n",
        encoding="utf-8",
    )
    return str(path)


async def test_cli_refuses_an_unprotected_control_module_in_one_line(tmp_path: Path) -> None:
    code, _out, err = await cli(
        *("serve", "--extensions-dir", "examples/extensions"),
        *("--apcore-config", _apcore_yaml(tmp_path), "--system-module", TOGGLE),
    )
    assert code == 1
    said = [line for line in err.splitlines() if line.startswith("Error:")]
    assert said == [
        f"Error: --system-module: {TOGGLE} is one of apcore's control modules: it is served "
        "only with authentication (auth_key, auth_jwks_url or api_keys), to callers with "
        "the 'operator' role"
    ]
    assert "Traceback" not in err


async def test_cli_refuses_a_control_module_to_several_workers_in_one_line(
    tmp_path: Path,
) -> None:
    code, _out, err = await cli(
        *("serve", "--extensions-dir", "examples/extensions", "--workers", "2", "--cluster"),
        *("--task-store", f"sqlite:///{tmp_path / 'tasks.db'}", "--system-module", TOGGLE),
        *("--apcore-config", _apcore_yaml(tmp_path), "--port", str(free_port())),
        env={"A2A_API_KEYS": KEYS[0]},
    )
    assert code == 1
    said = [line for line in err.splitlines() if line.startswith("Error:")]
    assert len(said) == 1 and "Traceback" not in err, err
    assert said[0].startswith(f"Error: --system-module: {TOGGLE} is one of apcore's control")
    assert said[0].endswith(
        "in cluster mode other processes serve the same agent: refusing to serve it"
    )


def test_cli_serves_the_system_modules_it_names(tmp_path: Path) -> None:
    import httpx

    args = ["--extensions-dir", "examples/extensions", "--apcore-config", _apcore_yaml(tmp_path)]
    with cli_server([*args, "--system-module", "system.health.summary"]) as (url, _proc):
        card = httpx.get(url + "/.well-known/agent-card.json", headers=V1, verify=TLS).json()
    ids = [s["id"] for s in card["skills"]]
    assert "system.health.summary" in ids and "math.add" in ids
    assert [i for i in ids if i.startswith("system.")] == ["system.health.summary"]


def test_cli_banner_lists_what_an_anonymous_caller_sees(tmp_path: Path) -> None:
    args = ["--extensions-dir", "examples/extensions", "--apcore-config", _apcore_yaml(tmp_path)]
    keys = [arg for key in KEYS for arg in ("--api-key", key)]
    with cli_server([*args, *keys, "--system-module", TOGGLE]) as (url, proc):
        import httpx

        card = httpx.get(url + "/.well-known/agent-card.json", headers=V1, verify=TLS).json()
    public = [s["id"] for s in card["skills"]]
    assert TOGGLE not in public and "math.add" in public
    banner = [ln for ln in proc.output().splitlines() if ": serving " in ln]
    assert len(banner) == 1, proc.output()
    served, restricted = banner[0].split("; for authorized callers only: ")
    assert f"serving {len(public)} skills ({', '.join(public)}) at {url}" in served
    assert restricted == TOGGLE


async def test_health_modules_show_other_callers_error_messages_to_operators_only() -> None:
    # apcore's health modules answer the text of recent errors of every call: ann's card
    # number, which the agent answered ann herself only as "Module execution failed",
    # reached any caller of system.health.* (the public card's anonymous ones too).
    client = apcore_client()

    @module(id="demo.pay", description="Pay", registry=client.registry)
    def pay(card: str) -> str:
        raise ValueError(f"card {card} declined")

    health = ("system.health.summary", "system.health.module")
    async with served(
        client.executor, api_keys=KEYS, require_auth=False, system_modules=health
    ) as http:
        secret = "4111-1111-1111-1111"
        failed = await call(http, "demo.pay", {"card": secret}, **USER)
        assert failed["result"]["task"]["status"]["state"] == "TASK_STATE_FAILED"
        assert secret not in json.dumps(failed["result"]["task"]["status"])
        for skill, data in zip(health, ({}, {"module_id": "demo.pay"}), strict=True):
            for who, shown in ((None, False), (USER, False), (OPS, True)):
                answer = await call(http, skill, data, **(who or {}))
                assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
                text = json.dumps(answer)
                assert "MODULE_EXECUTE_ERROR" in text, skill  # the error is still counted
                assert (secret in text) is shown, (skill, who)


def _data(answer: dict[str, Any]) -> Any:
    return answer["result"]["task"]["artifacts"][0]["parts"][0]["data"]


def _failure(answer: dict[str, Any]) -> Any:
    task = answer["result"]["task"]
    return task["status"]["state"], task["status"]["message"]["parts"][1]["data"]


async def test_read_only_system_modules_tell_a_caller_of_the_skills_it_sees_only() -> None:
    # apcore's manifest, health and usage modules answer about every registered module:
    # a caller without the operator role read the control plane's ids and schemas (which
    # its card and "Skill not found" keep from it), the unserved system modules, and the
    # server's file path of each module (source_path).
    client = apcore_client()
    own = {"modules": [{"module_id": TOGGLE}], "module_count": 1, "source_path": "/srv/a.py"}

    @module(id="demo.listing", description="A module's own output", registry=client.registry)
    def listing() -> dict[str, Any]:
        return json.loads(json.dumps(own))

    views = ("system.manifest.full", "system.health.summary", "system.usage.summary")
    about_one = ("system.manifest.module", "system.health.module", "system.usage.module")
    async with served(
        client.executor,
        api_keys=KEYS,
        require_auth=False,
        system_modules=[*views, *about_one, TOGGLE],
    ) as http:
        await call(http, "demo.echo", {"text": "hi"}, **USER)
        await call(http, "system.manifest.full", {}, **OPS)  # a call of a hidden-to-ann module
        seen = ["demo.echo", "demo.listing", *views, *about_one]
        for who in (None, USER):
            assert _data(await call(http, "demo.listing", {}, **(who or {}))) == own
            manifest = _data(await call(http, "system.manifest.full", {}, **(who or {})))
            assert sorted(m["module_id"] for m in manifest["modules"]) == sorted(seen)
            assert manifest["module_count"] == len(seen)
            assert {m["source_path"] for m in manifest["modules"]} == {None}
            health = _data(await call(http, "system.health.summary", {}, **(who or {})))
            assert sorted(m["module_id"] for m in health["modules"]) == sorted(seen)
            assert health["summary"]["total_modules"] == len(seen)
            quiet = {"include_healthy": False}
            few = _data(await call(http, "system.health.summary", quiet, **(who or {})))
            assert few["summary"] == health["summary"]
            usage = _data(await call(http, "system.usage.summary", {}, **(who or {})))
            assert {m["module_id"] for m in usage["modules"]} <= set(seen)
            assert usage["total_calls"] == sum(m["call_count"] for m in usage["modules"])
            # About a module it may not see: the answer about one that does not exist.
            for skill in about_one[1:]:
                hidden = await call(http, skill, {"module_id": TOGGLE}, **(who or {}))
                unknown = await call(http, skill, {"module_id": "nope.nope"}, **(who or {}))
                state, said = _failure(hidden)
                assert (state, json.dumps(said).replace(TOGGLE, "nope.nope")) == (
                    _failure(unknown)[0],
                    json.dumps(_failure(unknown)[1]),
                )
        everything = _data(await call(http, "system.manifest.full", {}, **OPS))
        assert len(everything["modules"]) == len(client.registry.list())
        about = await call(http, "system.health.module", {"module_id": TOGGLE}, **OPS)
        assert _data(about)["module_id"] == TOGGLE


async def test_a_system_module_output_its_schema_refuses_is_the_module_failure() -> None:
    # apcore 0.32.2's system.manifest.module answers source_path null for a module not
    # loaded from a file, which its output schema (a JSON Schema) refuses as "Input
    # validation failed: [SchemaValidationErrorDetail(...)]", the words of a caller's bad
    # input: the task failed with them, and a follow-up was asked again as if its answer
    # was wrong. A schema of JSON Schema refuses an output as a model's does.
    client = apcore_client()
    about = "system.manifest.module"
    async with served(client.executor, system_modules=[about]) as http:
        failed = await call(http, about, {"module_id": "demo.echo"})
    state, said = _failure(failed)
    assert (state, said["message"]) == (
        "TASK_STATE_FAILED",
        "Module output does not match its schema",
    )
    assert "Input" not in json.dumps(failed)


async def test_usage_of_a_module_names_no_caller_module_the_caller_may_not_see() -> None:
    # system.usage.module lists the modules that called the one asked about (apcore's
    # caller_id): ann, whom the ACL keeps from admin.audit (not on her card, "Skill not
    # found"), read its id in the callers of demo.echo, which admin.audit calls.
    client = apcore_client()

    @module(id="admin.audit", description="Audit", registry=client.registry)
    async def audit(context: Context) -> Any:
        return await context.executor.call_async("demo.echo", {"text": "x"}, context)

    client.executor.set_acl(
        ACL(
            rules=[
                ACLRule(callers=["admin.audit"], targets=["demo.echo"], effect="allow"),
                ACLRule(
                    callers=["@external"],
                    targets=["admin.*"],
                    effect="allow",
                    conditions={"roles": ["operator"]},
                ),
                ACLRule(callers=["@external"], targets=["demo.*", "system.*"], effect="allow"),
            ],
            default_effect="deny",
        )
    )
    usage = "system.usage.module"
    async with served(client.executor, api_keys=KEYS, system_modules=[usage]) as http:
        assert (await call(http, "admin.audit", {}, **USER))["error"]["code"] == -32601
        done = await call(http, "admin.audit", {}, **OPS)
        assert done["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        await call(http, "demo.echo", {"text": "hi"}, **USER)
        asked = {"module_id": "demo.echo"}
        seen = _data(await call(http, usage, asked, **USER))
        everything = _data(await call(http, usage, asked, **OPS))
    assert [c["caller_id"] for c in seen["callers"]] == ["unknown"]
    assert sorted(c["caller_id"] for c in everything["callers"]) == ["admin.audit", "unknown"]
    assert seen["call_count"] == everything["call_count"] == 2


async def test_a_module_not_published_is_not_told_of_to_a_non_operator() -> None:
    # A module without a description is no skill (not on any card, "Skill not found"),
    # yet system.manifest.full listed its id and schemas to any caller, and
    # system.manifest.module answered about it.
    client = apcore_client()

    @module(id="demo.quiet", description="", registry=client.registry)
    def quiet(secret_field: str) -> str:
        return secret_field

    views = ["system.manifest.full", "system.health.module"]
    async with served(client.executor, api_keys=KEYS, system_modules=views) as http:
        assert "demo.quiet" not in await skills(http)
        for who, shown in ((USER, False), (OPS, True)):
            manifest = _data(await call(http, "system.manifest.full", {}, **who))
            listed = [m["module_id"] for m in manifest["modules"]]
            assert ("demo.quiet" in listed) is shown, (who, listed)
            about = await call(http, "system.health.module", {"module_id": "demo.quiet"}, **who)
            state = about["result"]["task"]["status"]["state"]
            assert state == ("TASK_STATE_COMPLETED" if shown else "TASK_STATE_FAILED"), who
