"""SSRF policy for webhook URLs: every refusal names its reason (for a host name, not the\naddress it resolves to: the log has that)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from a2a.utils.errors import InvalidParamsError

from apcore_a2a.push import PushUrlPolicy

# DNS is an edge we do not own (and this machine has no resolver for public names):
# the fake answers like a resolver would, so the policy's handling of names is tested.
FAKE_DNS = {
    "localhost": ["127.0.0.1", "::1"],
    "hooks.example.com": ["93.184.215.14"],
    "v6.example.com": ["2606:2800:21f:cb07:6820:80da:af6b:8b2c"],
    "intranet.example.com": ["10.1.2.3"],
    "rebind.example.com": ["93.184.215.14", "192.168.0.7"],
    "metadata.example.com": ["169.254.169.254"],
}


async def fake_resolve(host: str, port: int) -> Sequence[str]:
    try:
        return FAKE_DNS[host]
    except KeyError:
        raise OSError(f"Name or service not known: {host}") from None


SECURE_TABLE = [
    ("https://127.0.0.1/hook", "loopback address (127.0.0.1)"),
    ("https://[::1]/hook", "loopback address (::1)"),
    ("https://localhost/hook", "host 'localhost' resolves to a non-public address"),
    ("https://10.0.0.1/hook", "private address (10.0.0.1)"),
    ("https://172.16.0.1/hook", "private address (172.16.0.1)"),
    ("https://192.168.1.1/hook", "private address (192.168.1.1)"),
    (
        "https://169.254.169.254/latest/meta-data",
        "cloud metadata service address (169.254.169.254)",
    ),
    ("https://100.64.0.1/hook", "carrier-grade NAT address (100.64.0.1, 100.64.0.0/10)"),
    ("http://example.com/hook", "only https URLs are allowed"),
    ("file:///etc/passwd", "URL scheme 'file' is not allowed; use https"),
    ("gopher://x", "URL scheme 'gopher' is not allowed; use https"),
]


@pytest.mark.parametrize(("url", "reason"), SECURE_TABLE)
async def test_secure_mode_refuses_with_reason(url: str, reason: str) -> None:
    policy = PushUrlPolicy(resolver=fake_resolve)
    assert await policy.check(url) == reason


@pytest.mark.parametrize(
    "url",
    ["https://93.184.215.14/hook", "https://hooks.example.com/a2a?x=1", "https://v6.example.com/"],
)
async def test_secure_mode_accepts_public_https(url: str) -> None:
    assert await PushUrlPolicy(resolver=fake_resolve).check(url) is None


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://169.254.1.1/", "link-local address (169.254.1.1)"),
        ("https://[fe80::1]/", "link-local address (fe80::1)"),
        ("https://224.0.0.1/", "multicast address (224.0.0.1)"),
        ("https://0.0.0.0/", "unspecified address (0.0.0.0)"),
        ("https://[::ffff:127.0.0.1]/", "loopback address (127.0.0.1)"),
        ("https://[::ffff:10.0.0.1]/", "private address (10.0.0.1)"),
        ("https://[fd00:ec2::254]/", "cloud metadata service address (fd00:ec2::254)"),
        ("https://100.100.100.200/", "cloud metadata service address (100.100.100.200)"),
        ("https://240.0.0.1/", "reserved address (240.0.0.1)"),
        ("https://[64:ff9b:1::a00:1]/", "reserved address (64:ff9b:1::a00:1)"),
        ("https://192.0.2.10/", "private address (192.0.2.10)"),
        (
            "https://intranet.example.com/",
            "host 'intranet.example.com' resolves to a non-public address",
        ),
        # One bad address among good ones is enough: the connection may pick it.
        (
            "https://rebind.example.com/",
            "host 'rebind.example.com' resolves to a non-public address",
        ),
        (
            "https://metadata.example.com/",
            "host 'metadata.example.com' resolves to a non-public address",
        ),
        ("https://nowhere.invalid/", "host 'nowhere.invalid' could not be resolved"),
        ("https:///path-only", "URL has no host"),
        ("https://user:pw@hooks.example.com/", "URL must not contain credentials"),
        ("https://hooks.example.com:99999/", "URL cannot be parsed"),
        ("hooks.example.com/webhook", "URL scheme '(none)' is not allowed; use https"),
        ("javascript:alert(1)", "URL scheme 'javascript' is not allowed; use https"),
    ],
)
async def test_other_refusals(url: str, reason: str) -> None:
    assert await PushUrlPolicy(resolver=fake_resolve).check(url) == reason


# IPv6 forms that deliver to the IPv4 address inside them are judged by that address.
TUNNELLED = [
    # 6to4 around 127.0.0.1 (the form reported in issue 17), 10.0.0.1 and the metadata IP.
    ("https://[2002:7f00:1::]/", "loopback address (127.0.0.1) inside 6to4 2002:7f00:1::"),
    ("https://[2002:a00:1::1]/", "private address (10.0.0.1) inside 6to4 2002:a00:1::1"),
    (
        "https://[2002:a9fe:a9fe::]/",
        "cloud metadata service address (169.254.169.254) inside 6to4 2002:a9fe:a9fe::",
    ),
    # Teredo: client 127.0.0.1 (stored XOR-ed as 80ff:fffe), public server 65.54.227.120.
    (
        "https://[2001:0:4136:e378:8000:63bf:80ff:fffe]/",
        "loopback address (127.0.0.1) inside Teredo 2001:0:4136:e378:8000:63bf:80ff:fffe",
    ),
    # Teredo whose server is private (10.0.0.1) and client public (93.184.215.14).
    (
        "https://[2001:0:a00:1:8000:63bf:a247:28f1]/",
        "private address (10.0.0.1) inside Teredo 2001:0:a00:1:8000:63bf:a247:28f1",
    ),
    # NAT64 well-known prefix around 127.0.0.1 and 192.168.1.1.
    ("https://[64:ff9b::7f00:1]/", "loopback address (127.0.0.1) inside NAT64 64:ff9b::7f00:1"),
    (
        "https://[64:ff9b::c0a8:101]/",
        "private address (192.168.1.1) inside NAT64 64:ff9b::c0a8:101",
    ),
]


@pytest.mark.parametrize(("url", "reason"), TUNNELLED)
async def test_tunnelled_ipv4_is_judged_by_the_address_inside(url: str, reason: str) -> None:
    assert await PushUrlPolicy(resolver=fake_resolve).check(url) == reason
    # Allowing loopback (insecure mode) relaxes only the loopback cases.
    insecure = await PushUrlPolicy(allow_insecure=True, resolver=fake_resolve).check(url)
    assert insecure == (None if reason.startswith("loopback") else reason)


@pytest.mark.parametrize(
    "url",
    [
        "https://[2002:5db8:d70e::1]/",  # 6to4 around 93.184.215.14
        "https://[64:ff9b::5db8:d70e]/",  # what DNS64 synthesizes for 93.184.215.14
        "https://[2001:0:4136:e378:8000:63bf:a247:28f1]/",  # Teredo, both ends public
    ],
)
async def test_tunnelled_public_ipv4_is_accepted(url: str) -> None:
    assert await PushUrlPolicy(resolver=fake_resolve).check(url) is None


async def test_a_name_resolving_to_6to4_loopback_is_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def resolve(host: str, port: int) -> Sequence[str]:
        return ["2002:7f00:1::"]

    caplog.set_level("INFO", logger="apcore_a2a.push")
    assert await PushUrlPolicy(resolver=resolve).check("https://sneaky.example/") == (
        "host 'sneaky.example' resolves to a non-public address"
    )
    # The address and why it is refused are the operator's to read.
    assert "loopback address (127.0.0.1) inside 6to4 2002:7f00:1::" in caplog.text


async def test_insecure_mode_allows_http_and_loopback_only() -> None:
    policy = PushUrlPolicy(allow_insecure=True, resolver=fake_resolve)
    for url in (
        "http://127.0.0.1:9000/hook",
        "http://localhost/hook",
        "https://[::1]/x",
        "http://hooks.example.com/hook",
    ):
        assert await policy.check(url) is None, url
    assert await policy.check("http://10.0.0.1/") == "private address (10.0.0.1)"
    assert await policy.check("http://169.254.169.254/") == (
        "cloud metadata service address (169.254.169.254)"
    )
    assert await policy.check("http://100.64.0.1/") == (
        "carrier-grade NAT address (100.64.0.1, 100.64.0.0/10)"
    )
    assert await policy.check("file:///etc/passwd") == "URL scheme 'file' is not allowed; use https"
    assert await policy.check("gopher://x") == "URL scheme 'gopher' is not allowed; use https"


async def test_default_resolver_is_used_for_names() -> None:
    # Uses the real loop resolver: 'localhost' is in /etc/hosts everywhere.
    assert await PushUrlPolicy().check("https://localhost/") == (
        "host 'localhost' resolves to a non-public address"
    )
    assert await PushUrlPolicy(allow_insecure=True).check("http://localhost:1/") is None


async def test_validate_raises_invalid_params_with_the_reason() -> None:
    policy = PushUrlPolicy(resolver=fake_resolve)
    await policy.validate("https://hooks.example.com/", "alice")  # accepted: no error
    with pytest.raises(InvalidParamsError) as info:
        await policy.validate("https://10.0.0.1/hook", "alice")
    assert info.value.message == "Invalid push notification URL: private address (10.0.0.1)"
