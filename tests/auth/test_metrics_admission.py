"""``/metrics`` follows the admission of A2A calls and names only the skills the caller's
ACL shows it (issue 40 item 8).

Before: an authenticated caller without the agent's required role got the figures (200)
while its A2A calls got 403, and the Prometheus labels named ``admin.reset`` to callers
the ACL hides it from.
"""

from __future__ import annotations

import httpx

from tests._support import TLS
from tests.auth.agent import serve_agent

KEYS = ("k-admin-0123456789abcdef=ann:admin+staff", "k-staff-0123456789abcdef=sam:staff",
        "k-guest-0123456789abcdef=gus:guest", "k-ops-00123456789abcdef=oli:operator+staff")  # fmt: skip
ADMIN, STAFF, GUEST, OPS = ({"X-API-Key": k.split("=")[0]} for k in KEYS)
PROMETHEUS = {"Accept": "text/plain"}


def _send(url: str, skill: str, key: dict[str, str], data: dict[str, int]) -> None:
    message = {"messageId": skill + key["X-API-Key"], "role": "ROLE_USER",
               "parts": [{"data": data}], "metadata": {"skillId": skill}}  # fmt: skip
    call = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    answer = httpx.post(
        url + "/", json=call, headers={**key, "A2A-Version": "1.0"}, timeout=30, verify=TLS
    )
    assert "result" in answer.json(), answer.text


def test_metrics_needs_the_roles_a2a_calls_need() -> None:
    with serve_agent(api_keys=KEYS, metrics=True, required_roles=("staff",)) as url:
        refused = httpx.get(url + "/metrics", headers=GUEST, timeout=30, verify=TLS)
        assert refused.status_code == 403  # main: 200
        assert httpx.get(url + "/metrics", timeout=30, verify=TLS).status_code == 401
        assert httpx.get(url + "/metrics", headers=STAFF, timeout=30, verify=TLS).status_code == 200


def test_metrics_names_only_the_skills_the_caller_may_see() -> None:
    with serve_agent(api_keys=KEYS, metrics=True) as url:
        _send(url, "admin.reset", ADMIN, {})
        _send(url, "demo.add", STAFF, {"a": 1, "b": 2})

        def figures(key: dict[str, str]) -> str:
            answer = httpx.get(
                url + "/metrics", headers={**key, **PROMETHEUS}, timeout=30, verify=TLS
            )
            assert answer.status_code == 200
            return answer.text

        staff, admin, operator = figures(STAFF), figures(ADMIN), figures(OPS)
        assert 'skill="demo.add"' in staff
        assert "admin.reset" not in staff  # main: named to everyone with a key
        assert 'skill="admin.reset"' in admin  # the ACL shows it to admins
        assert 'skill="admin.reset"' in operator  # operators see every figure
