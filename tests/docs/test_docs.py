"""The documentation works as written: every code block of README.md and docs/*.md runs.

The blocks run in a child pytest (``python -m pytest README.md docs``, collected by the
root ``conftest.py`` with Sybil; how each kind of block runs is in tests/docs/_runner.py),
so what the snippets do to their process stays out of this one. A block that cannot run
here carries ``<!-- skip: next "reason" -->`` just above it, and the reason is required.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests._support import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SKIP = re.compile(r"<!--\s*skip:\s*(\w+)(.*?)-->")
REASON = re.compile(r'^\s*"[^"]{10,}"\s*$')
SUMMARY = re.compile(r"(\d+) passed(?:, (\d+) skipped)? in ")
#: A shell block (with the skip directive, if any, on the line above its fence).
SHELL_BLOCK = re.compile(
    r"^(?P<above>[^\n]*)\n[ \t]*```(?:bash|sh|console)[ \t]*\n(?P<body>.*?)^[ \t]*```",
    re.MULTILINE | re.DOTALL,
)
#: Commands that change the machine a page runs on, not the reader's scratch folder: the
#: firewall, kernel settings, routes and interfaces, services, users, mounts (a command's
#: place in its line: at its start, after a separator or ``sudo``).
HOST_CHANGE = re.compile(
    r"(?m)(?:^[ \t]*(?:\$[ \t]+)?|[;&|(][ \t]*|sudo[ \t]+)"
    r"(?:ip6?tables(?:-restore)?|nft|sysctl\s+-w|ip\s+(?:link|addr|route|netns)\s+(?:add|del|set)"
    r"|systemctl\s+(?:start|stop|restart|enable|disable)|useradd|usermod|mount|swapon)\b"
)


# Hang guards, not speed checks: every page starts the agents it documents, which on a
# saturated 2-core machine takes minutes.
@pytest.mark.timeout(1500)
def test_every_documented_block_runs_as_written() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            # In this process's own: three more workers (pyproject's -n 3) each import
            # and collect everything again, 23 s of CPU taken from the suite's other files.
            "-n",
            "0",
            "-q",
            "-rs",
            "README.md",
            "docs",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1400,
        check=False,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-12000:]
    summary = SUMMARY.search(output)
    assert summary is not None, output[-3000:]
    passed = int(summary.group(1))
    skipped = int(summary.group(2) or 0)
    # Each skip directive is an item of its own that passes, and skips one block.
    directives = sum(len(SKIP.findall(page.read_text())) for page in PAGES)
    assert skipped == directives, output[-3000:]
    assert passed - directives >= 40, output[-3000:]


def test_every_skipped_block_says_why() -> None:
    found = 0
    for page in PAGES:
        for action, reason in SKIP.findall(page.read_text()):
            found += 1
            assert action == "next", f"{page.name}: use 'skip: next \"reason\"', got {action!r}"
            assert REASON.match(reason), f"{page.name}: a skipped block needs a reason: {reason!r}"
    assert found > 0


def test_no_block_that_runs_changes_the_host() -> None:
    # The documented blocks run on the developer's or CI's own machine (tests/docs/_runner.py):
    # a firewall rule a page shows as advice once ran there and reset connections of later
    # tests. Such a block is shown, not run: it carries a skip directive.
    found = []
    for page in PAGES:
        for block in SHELL_BLOCK.finditer(page.read_text()):
            shown_only = SKIP.search(block.group("above")) is not None
            if not shown_only and HOST_CHANGE.search(block.group("body")):
                found.append(f"{page.name}: {block.group('body').splitlines()[0]}")
    assert found == [], "blocks that change the host must be marked skip: " + "; ".join(found)
