"""A page that starts an agent starts it on a port of its own.

The reader keeps the README's quick-start agent running on 8000 while following the other
pages; a page that served on 8000 too (or on another page's port) would fail with
"address already in use". Every ``apcore-a2a serve`` line of a docs page names
``--port 80NN``, every ``serve(...)`` call ``port=80NN``, one number per page, never 8000.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests._support import ROOT

_BLOCK = re.compile(r"```(bash|console|python)\n(.*?)```", re.DOTALL)
_CLI_SERVE = re.compile(r"^[^#\n]*\bapcore-a2a serve\b[^\n]*(?:\\\n[^\n]*)*", re.MULTILINE)
_PY_SERVE = re.compile(r"^\s*serve\((?:[^()]|\([^()]*\))*\)", re.MULTILINE)
_PORT = re.compile(r"(?:--port |port=)(\d+)")
_COMMENT = re.compile(r"#[^\n]*")


def _serve_ports(page: Path) -> list[tuple[str, str | None]]:
    """``(serve line, port it names)`` of every agent a page's code blocks start."""
    found = []
    for lang, block in _BLOCK.findall(page.read_text()):
        pattern = _PY_SERVE if lang == "python" else _CLI_SERVE
        for line in pattern.findall(block):
            port = _PORT.search(_COMMENT.sub("", line))
            found.append((line.strip(), port.group(1) if port else None))
    return found


def test_each_page_serves_on_its_own_port() -> None:
    owners: dict[str, str] = {}
    for page in sorted((ROOT / "docs").glob("*.md")):
        for line, port in _serve_ports(page):
            assert port is not None, f"{page.name}: no port of its own: {line}"
            assert port != "8000", f"{page.name}: the quick-start agent's port: {line}"
            assert owners.setdefault(port, page.name) == page.name, (
                f"{page.name} and {owners[port]} both serve on {port}"
            )
    assert len(owners) >= 5  # guard against a vacuous run


def test_the_quick_start_serves_on_8000() -> None:
    [(line, port), *_] = _serve_ports(ROOT / "README.md")
    assert port in (None, "8000"), line
