"""SSRF: deprecated site-local IPv6 webhooks are refused, and a delivery connects to the
address the policy checked, with no second DNS lookup a rebinding name could answer
differently (issue 31, item 6)."""

from __future__ import annotations

import httpx
import pytest

from tests._support import TLS

from ._agent import add_message, push_agent, receiver, rpc
from ._dns import A, name_server


async def test_a_site_local_ipv6_webhook_is_refused_at_registration() -> None:
    async with (
        push_agent(push_allow_insecure_urls=False) as (base, _app),
        httpx.AsyncClient(timeout=30, verify=TLS) as client,
    ):
        params = {
            "message": add_message(),
            "configuration": {"taskPushNotificationConfig": {"url": "https://[fec0::1]/hook"}},
        }
        reply = await rpc(client, base, "SendMessage", params)
    assert reply["error"]["code"] == -32602, reply
    assert "site-local address (fec0::1" in reply["error"]["message"]


async def test_each_delivery_attempt_resolves_the_webhook_name_once() -> None:
    # The agent's name server notes every query (a rebinding name may answer each lookup
    # differently).
    async with (
        name_server({"rebind.test": ["127.0.0.1"]}) as dns,
        receiver() as rec,
        push_agent(push_dns_servers=[dns.address]) as (base, app),
        httpx.AsyncClient(timeout=30, verify=TLS) as client,
    ):
        port = httpx.URL(rec.base).port
        url = f"http://rebind.test:{port}/hook"
        params = {
            "message": add_message(),
            "configuration": {"taskPushNotificationConfig": {"url": url}},
        }
        reply = await rpc(client, base, "SendMessage", params)
        assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", reply
        await app.state.a2a.extras["push"].sender.idle()
        delivered = rec.attempts("/hook")
        assert delivered and all(d.status == 204 for d in delivered)
        assert {d.headers["host"] for d in delivered} == {f"rebind.test:{port}"}
    # One lookup (its A query) at registration, then one per attempt: the check's answer
    # is the address the POST went to.
    assert dns.asked.count(("rebind.test", A)) == 1 + len(delivered), dns.asked


async def test_a_refused_name_does_not_tell_the_caller_its_internal_address(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A caller must not learn what the agent's DNS says about internal names (which
    # address db.corp.test has): the reason names the host, the address goes to the log.
    caplog.set_level("INFO", logger="apcore_a2a.push")
    async with (
        name_server({"db.corp.test": ["10.20.30.40"]}) as dns,
        push_agent(push_allow_insecure_urls=False, push_dns_servers=[dns.address]) as (
            base,
            _app,
        ),
        httpx.AsyncClient(timeout=30, verify=TLS) as client,
    ):
        params = {
            "message": add_message(),
            "configuration": {"taskPushNotificationConfig": {"url": "https://db.corp.test/"}},
        }
        reply = await rpc(client, base, "SendMessage", params)
    assert reply["error"]["code"] == -32602, reply
    message = reply["error"]["message"]
    assert message == (
        "Invalid push notification URL: host 'db.corp.test' resolves to a non-public address"
    )
    assert "10.20.30.40" in caplog.text  # the operator still sees it
