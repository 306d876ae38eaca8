"""Raw HTTP without an A2A-Version header: 0.3 names act as 0.3, 1.0 names as 1.0."""

from __future__ import annotations

import httpx
import pytest

from tests._support import TLS


def rpc(url: str, method: str, params: dict, *, id: int = 1, headers: dict | None = None) -> dict:
    body = {"jsonrpc": "2.0", "id": id, "method": method, "params": params}
    response = httpx.post(url + "/", json=body, headers=headers or {}, timeout=10, verify=TLS)
    assert response.status_code == 200, response.text
    return response.json()


def test_0_3_message_send_with_skill_id(agent_url: str) -> None:
    reply = rpc(
        agent_url,
        "message/send",
        {
            "message": {
                "kind": "message",
                "messageId": "m-1",
                "role": "user",
                "parts": [{"kind": "data", "data": {"a": 2, "b": 40}}],
            },
            "metadata": {"skillId": "math.add"},
        },
    )
    task = reply["result"]
    assert task["kind"] == "task"
    assert task["status"]["state"] == "completed"
    assert task["artifacts"][0]["parts"] == [{"kind": "data", "data": {"sum": 42}}]
    assert task["history"][0]["messageId"] == "m-1"
    assert task["metadata"] == {"skillId": "math.add"}


def test_0_3_text_part_in_message_metadata(agent_url: str) -> None:
    reply = rpc(
        agent_url,
        "message/send",
        {
            "message": {
                "kind": "message",
                "messageId": "m-2",
                "role": "user",
                "parts": [{"kind": "text", "text": "hi"}],
                "metadata": {"skillId": "text.shout"},
            }
        },
    )
    assert reply["result"]["artifacts"][0]["parts"] == [{"kind": "text", "text": "HI!"}]


def test_1_0_send_message_without_version_header_is_refused(agent_url: str) -> None:
    """No A2A-Version is 0.3 (spec §3.6.2): a 1.0 method is refused, naming the header."""
    params = {"message": {"messageId": "m-3", "role": "ROLE_USER",
                          "parts": [{"data": {"a": 1, "b": 2}}], "metadata": {"skillId": "math.add"}}}  # fmt: skip
    refused = rpc(agent_url, "SendMessage", params)["error"]
    assert refused["code"] == -32009
    assert refused["data"][0]["reason"] == "VERSION_NOT_SUPPORTED"
    assert "A2A-Version: 1.0" in refused["message"]
    # with the header it is served, and the 0.3 name (no header) reads the task in 0.3 shape
    task = rpc(agent_url, "SendMessage", params, headers={"A2A-Version": "1.0"})["result"]["task"]
    assert task["artifacts"][0]["parts"] == [{"data": {"sum": 3}}]
    legacy = rpc(agent_url, "tasks/get", {"id": task["id"]}, id=3)
    assert legacy["result"]["status"]["state"] == "completed"


def test_explicit_version_header_still_enforced(agent_url: str) -> None:
    reply = rpc(
        agent_url,
        "SendMessage",
        {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]}},
        headers={"A2A-Version": "0.3"},
    )
    assert reply["error"]["code"] == -32009


def test_rest_1_0_without_header_is_refused(agent_url: str) -> None:
    body = {"message": {"messageId": "r-1", "role": "ROLE_USER", "parts": [{"text": "rest"}],
                        "metadata": {"skillId": "text.shout"}}}  # fmt: skip
    response = httpx.post(agent_url + "/message:send", json=body, timeout=10, verify=TLS)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["details"][0]["reason"] == "VERSION_NOT_SUPPORTED"
    assert "A2A-Version: 1.0" in response.json()["error"]["message"]
    served = httpx.post(
        agent_url + "/message:send",
        json=body,
        headers={"A2A-Version": "1.0"},
        timeout=10,
        verify=TLS,
    )
    assert served.status_code == 200, served.text
    assert served.headers["content-type"] == "application/a2a+json"
    assert served.json()["task"]["artifacts"][0]["parts"] == [{"text": "REST!"}]


def test_rest_0_3_v1_path_without_header(agent_url: str) -> None:
    body = {
        "message": {
            "messageId": "r-2",
            "role": "ROLE_USER",
            "content": [{"text": "legacy"}],
            "metadata": {"skillId": "text.shout"},
        }
    }
    response = httpx.post(agent_url + "/v1/message:send", json=body, timeout=10, verify=TLS)
    assert response.status_code == 200, response.text
    assert "LEGACY!" in response.text


@pytest.mark.parametrize("path", ["/.well-known/agent-card.json", "/.well-known/agent.json"])
def test_card_paths_cache_and_etag(agent_url: str, path: str) -> None:
    first = httpx.get(agent_url + path, timeout=10, verify=TLS)
    assert first.status_code == 200
    assert first.headers["cache-control"] == "public, max-age=300"
    etag = first.headers["etag"]
    again = httpx.get(agent_url + path, headers={"If-None-Match": etag}, timeout=10, verify=TLS)
    assert again.status_code == 304
    assert again.content == b""
    other = httpx.get(
        agent_url + path, headers={"If-None-Match": 'W/"nope"'}, timeout=10, verify=TLS
    )
    assert other.status_code == 200


def test_card_content(agent_url: str) -> None:
    card = httpx.get(agent_url + "/.well-known/agent-card.json", timeout=10, verify=TLS).json()
    assert card["name"] == "test-agent"
    assert card["version"] == "0.0.0"
    interfaces = {(i["protocolBinding"], i["protocolVersion"]) for i in card["supportedInterfaces"]}
    assert interfaces == {
        ("JSONRPC", "1.0"),
        ("JSONRPC", "0.3"),
        ("HTTP+JSON", "1.0"),
        ("HTTP+JSON", "0.3"),
    }
    skills = {s["id"]: s for s in card["skills"]}
    assert set(skills) == {"math.add", "text.stats", "errors.raise", "text.shout", "data.pair"}
    assert skills["math.add"]["name"] == "Math Add"
    assert skills["text.stats"]["inputModes"] == ["application/json", "text/plain"]
    assert skills["text.shout"]["outputModes"] == ["text/plain"]
    ext = card["capabilities"]["extensions"][0]
    assert ext["uri"] == "urn:apcore:a2a:skill-schemas:v1"
    schema = ext["params"]["skills"]["math.add"]["inputSchema"]
    assert schema["properties"]["a"]["type"] == "integer"
    raw = httpx.get(agent_url + "/.well-known/agent-card.json", timeout=10, verify=TLS).text
    assert ".0," not in raw and ".0}" not in raw  # whole numbers are published as integers
    assert card["capabilities"]["streaming"] is True
    # 0.3 keys merged in for older clients
    assert card["protocolVersion"] == "0.3"
    assert card["preferredTransport"] == "JSONRPC"


def test_legacy_card_is_0_3_shape(agent_url: str) -> None:
    card = httpx.get(agent_url + "/.well-known/agent.json", timeout=10, verify=TLS).json()
    assert card["protocolVersion"] == "0.3"
    assert card["url"].startswith(agent_url)
    assert card["preferredTransport"] == "JSONRPC"
    assert {"transport": "HTTP+JSON", "url": agent_url} in card["additionalInterfaces"]
    assert "supportedInterfaces" not in card
