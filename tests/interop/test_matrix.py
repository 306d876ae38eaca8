"""The interop matrix: every genuine peer x binding x version x operation, one test per cell.

Each peer ran as its own process against the session's agent (see ``_runs.py``); these
tests judge what it observed. A cell a peer does not offer (0.3 has no ListTasks; some
clients have no call for a push-config operation) must say so exactly, so the test notices
when a peer gains the call.
"""

from __future__ import annotations

import hashlib
from typing import Any

import httpx
import jwt
import pytest

from tests._support import TLS
from tests.interop._runs import COMBOS, Runs, Target
from tests.interop._webhook import Delivery, Webhook
from tests.interop.conftest import AGENT_NAME

SKILLS = ["interop.approve", "interop.count", "interop.echo", "interop.files", "interop.hold"]
INTERFACES = sorted(f"{b} {v}" for b in ("JSONRPC", "HTTP+JSON", "GRPC") for v in ("1.0", "0.3"))
PUSH_SIGNING = "urn:apcore:a2a:push-signing:v1"

#: Cells where the peer has no such call, and why (asserted, not skipped).
NOT_OFFERED: dict[tuple[str, str, str, str], str] = {
    **{
        (p, b, "0.3", "list"): "0.3"
        for p in ("sdk13", "sdk03", "js")
        for b in ("JSONRPC", "HTTP+JSON", "GRPC")
    },
    **{
        ("sdk03", b, "0.3", op): "client"
        for b in ("JSONRPC", "HTTP+JSON", "GRPC")
        for op in ("push_list", "push_delete")
    },
    ("sdk13", "HTTP+JSON", "0.3", "push_list"): "client",
    ("sdk13", "HTTP+JSON", "0.3", "push_delete"): "client",
}


def cell_id(combo: tuple[str, str, str]) -> str:
    return "-".join(combo)


def state(value: str | None) -> str:
    """``TASK_STATE_INPUT_REQUIRED`` (1.0) and ``input-required`` (0.3) -> ``input-required``."""
    return (value or "").lower().removeprefix("task_state_").replace("_", "-")


def parts(value: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Parts without the 0.3 ``kind`` tag, numbers as the JSON they carry."""
    return [{k: v for k, v in p.items() if k != "kind"} for p in value]


def observed(runs: Runs, combo: tuple[str, str, str], op: str) -> dict[str, Any]:
    result = runs.get(combo).op(op)
    assert "error" not in result, result["error"] + "\n" + result.get("where", "")
    assert result.get("offered", True) is not False, result
    return result


def cells(op: str | None = None) -> pytest.MarkDecorator:
    """Parametrize over every combo that offers *op* (cells in NOT_OFFERED are tested apart)."""
    chosen = [c for c in COMBOS if op is None or (*c, op) not in NOT_OFFERED]
    return pytest.mark.parametrize("combo", chosen, ids=[cell_id(c) for c in chosen])


combos = cells()


@combos
def test_card(runs: Runs, combo: tuple[str, str, str]) -> None:
    got = observed(runs, combo, "card")
    assert got["name"] == AGENT_NAME
    assert got["skills"] == SKILLS
    if combo[0] == "sdk03":
        assert got["protocol_version"] == "0.3"
        assert got["transports"] == ["GRPC", "HTTP+JSON", "JSONRPC"]
    else:
        assert got["interfaces"] == INTERFACES


@combos
def test_send(runs: Runs, combo: tuple[str, str, str]) -> None:
    got = observed(runs, combo, "send")
    assert state(got["state"]) == "completed"
    assert [parts(a) for a in got["artifacts"]] == [[{"data": {"text": "echo: hello interop"}}]]


@combos
@pytest.mark.parametrize("name", ["binary", "base64text"])
def test_send_file(runs: Runs, combo: tuple[str, str, str], name: str) -> None:
    got = observed(runs, combo, f"file_{name}")
    assert state(got["state"]) == "completed"
    assert got["module"] == got["sent"], "the module received other bytes than were sent"


@combos
def test_stream(runs: Runs, combo: tuple[str, str, str]) -> None:
    events = observed(runs, combo, "stream")["events"]
    assert events[0] == ["task", events[0][1]] and state(events[0][1]) == "submitted"
    assert events[-1][0] == "status_update" and state(events[-1][1]) == "completed"
    chunks = [e[1] for e in events if e[0] == "artifact_update"]
    values = [p["data"]["remaining"] for chunk in chunks for p in parts(chunk)]
    assert values == [3, 2, 1, 0]
    # The proto requires at least one part in every artifact (a2a.proto: Artifact.parts).
    assert all(chunks), f"an artifact update carried no parts: {events}"


@combos
def test_get(runs: Runs, combo: tuple[str, str, str]) -> None:
    got = observed(runs, combo, "get")
    assert got["same_id"] and state(got["state"]) == "completed"
    assert got["history"] >= 1


@cells("list")
def test_list(runs: Runs, combo: tuple[str, str, str]) -> None:
    assert observed(runs, combo, "list") == {"contains_task": True}


@combos
def test_cancel(runs: Runs, combo: tuple[str, str, str]) -> None:
    assert state(observed(runs, combo, "cancel")["state"]) == "canceled"


@combos
def test_resubscribe(runs: Runs, combo: tuple[str, str, str]) -> None:
    got = observed(runs, combo, "resubscribe")
    assert got["first"] == "task"
    assert state(got["last_state"]) == "completed"


@combos
def test_push_config_set(runs: Runs, combo: tuple[str, str, str]) -> None:
    run = runs.get(combo)
    got = observed(runs, combo, "push_set")
    assert got["has_id"]
    assert got["url"].endswith(f"/hook/{run.run_id}")
    assert got["token"] == f"token-{run.run_id}"


@combos
def test_push_config_get(runs: Runs, combo: tuple[str, str, str]) -> None:
    got = observed(runs, combo, "push_get")
    assert got["same_id"] and got["url"].endswith(f"/hook/{runs.get(combo).run_id}")


@cells("push_list")
def test_push_config_list(runs: Runs, combo: tuple[str, str, str]) -> None:
    assert observed(runs, combo, "push_list") == {"ids": [True]}


@cells("push_delete")
def test_push_config_delete(runs: Runs, combo: tuple[str, str, str]) -> None:
    assert observed(runs, combo, "push_delete") == {"left": 0}


@combos
def test_push_delivery(
    runs: Runs,
    combo: tuple[str, str, str],
    webhook: tuple[Webhook, str],
    interop_agent: Target,
) -> None:
    run = runs.get(combo)
    got = observed(runs, combo, "push_delivery")
    assert state(got["state"]) == "completed"
    deliveries = webhook[0].deliveries(run.run_id)
    assert deliveries, "no delivery arrived"
    header, keys = _signing(interop_agent.url)
    for delivery in deliveries:
        assert delivery.headers.get("x-a2a-notification-token") == f"token-{run.run_id}"
        _verify_signature(delivery, header, keys, interop_agent.url)
    bodies = [d.json() for d in deliveries]
    if combo[2] == "0.3":
        # A 0.3 receiver gets what 0.3 senders post: the Task itself.
        assert all(b.get("kind") == "task" and b.get("id") == got["task"] for b in bodies), bodies
        assert state(bodies[-1]["status"]["state"]) == "completed"
    else:
        # A 1.0 receiver gets a StreamResponse: exactly one of its payload members.
        payloads = {"task", "message", "statusUpdate", "artifactUpdate"}
        assert all(len(b) == 1 and set(b) <= payloads for b in bodies), bodies
        final = next(iter(bodies[-1].values()))
        assert state(final["status"]["state"]) == "completed"


@combos
def test_approval_round_trip(runs: Runs, combo: tuple[str, str, str]) -> None:
    got = observed(runs, combo, "approval")
    assert state(got["asked"]) == "input-required"
    assert state(got["state"]) == "completed"
    assert parts(got["parts"]) == [{"data": {"paid": 5}}]


def _signing(agent_url: str) -> tuple[str, dict[str, jwt.PyJWK]]:
    """The header that carries the delivery JWT (from the card) and the agent's keys."""
    card = httpx.get(agent_url + "/.well-known/agent-card.json", timeout=10, verify=TLS).json()
    ext = next(e for e in card["capabilities"]["extensions"] if e["uri"] == PUSH_SIGNING)
    keyset = jwt.PyJWKSet.from_dict(
        httpx.get(ext["params"]["jwksUrl"], timeout=10, verify=TLS).json()
    )
    return ext["params"]["header"].lower(), {str(k.key_id): k for k in keyset.keys}


def _verify_signature(
    delivery: Delivery, header: str, keys: dict[str, jwt.PyJWK], agent_url: str
) -> None:
    value = delivery.headers.get(header, "")
    token = value.split(" ", 1)[1] if value.lower().startswith("bearer ") else value
    kid = jwt.get_unverified_header(token)["kid"]
    claims = jwt.decode(
        token,
        keys[kid],
        algorithms=[keys[kid].algorithm_name],
        audience=delivery.url,
        issuer=agent_url,
    )
    assert claims["body_sha256"] == hashlib.sha256(delivery.body).hexdigest()


@pytest.mark.parametrize(
    "cell", sorted(NOT_OFFERED), ids=["-".join(c) for c in sorted(NOT_OFFERED)]
)
def test_not_offered_cells_say_so(runs: Runs, cell: tuple[str, str, str, str]) -> None:
    """The peer has no such call; if it gains one, this fails and the cell joins the matrix."""
    result = runs.get(cell[:3]).op(cell[3])
    assert result.get("offered") is False, f"{cell[3]} is now offered: {result}"


def test_every_combo_of_every_peer_is_in_the_matrix() -> None:
    """sdk13 and js offer all six binding x version pairs; the 0.3 SDK its three 0.3 ones."""
    assert sorted(COMBOS) == sorted(
        [
            (p, b, v)
            for p in ("sdk13", "js")
            for b in ("JSONRPC", "HTTP+JSON", "GRPC")
            for v in ("1.0", "0.3")
        ]
        + [("sdk03", b, "0.3") for b in ("JSONRPC", "HTTP+JSON", "GRPC")]
    )
