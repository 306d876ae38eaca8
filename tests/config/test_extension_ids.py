"""Module ids with one and with several ``--extensions-dir`` folders (issue 19, item 5).

apcore prefixes ids with the folder's name as soon as more than one folder is scanned; the
rule is documented (README) and the CLI says so at startup and lists the ids it serves.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import httpx

from apcore_a2a.cli.serve import extension_ids_notice
from tests._support import (
    CLI_STOP_TIMEOUT,
    ROOT,
    TLS,
    ServerProcess,
    free_port,
    stop_process,
    wait_http,
)

MODULE = ROOT / "tests" / "interop" / "extensions" / "interop" / "echo.py"


def _folder(base: Path, name: str, module: str) -> Path:
    target = base / name / "tools"
    target.mkdir(parents=True)
    shutil.copyfile(MODULE, target / f"{module}.py")
    return base / name


def _serve(*folders: Path) -> tuple[list[str], str]:
    """Start ``apcore-a2a serve`` on *folders*; return the card's skill ids and the output."""
    port = free_port()
    args = [arg for folder in folders for arg in ("--extensions-dir", str(folder))]
    cmd = [sys.executable, "-m", "apcore_a2a", "serve", "--host", "127.0.0.1", "--port", str(port)]
    proc = ServerProcess([*cmd, *args], cwd=ROOT)
    url = f"http://127.0.0.1:{port}/.well-known/agent-card.json"
    try:
        wait_http(url, proc=proc)
        card = httpx.get(url, timeout=30, verify=TLS).json()
    finally:
        stop_process(proc, timeout=CLI_STOP_TIMEOUT)
    output = proc.output()
    return sorted(s["id"] for s in card["skills"]), output


def test_one_folder_ids_are_the_file_paths(tmp_path: Path) -> None:
    ids, output = _serve(_folder(tmp_path, "alpha", "echo"))
    assert ids == ["tools.echo"]
    assert "serving 1 skills (tools.echo)" in output
    assert "extension folders" not in output


def test_several_folders_prefix_ids_and_the_cli_says_so(tmp_path: Path) -> None:
    alpha = _folder(tmp_path, "alpha", "echo")
    beta = _folder(tmp_path, "beta", "echo")  # the same relative path: no collision
    ids, output = _serve(alpha, beta)
    assert ids == ["alpha.tools.echo", "beta.tools.echo"]
    assert "2 extension folders (alpha, beta): each module id starts with its folder's name" in (
        output
    )
    assert "alpha.tools.echo, beta.tools.echo" in output


def test_notice_only_for_several_folders() -> None:
    assert extension_ids_notice([]) is None
    assert extension_ids_notice(["./a"]) is None
    assert extension_ids_notice(["x/a", "y/b", "c"]) == (
        "apcore-a2a: 3 extension folders (a, b, c): each module id starts with its folder's name"
    )
