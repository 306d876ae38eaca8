"""A module file apcore skips is named, with what it lacks (issue 34, item 3).

apcore drops a class without ``output_schema`` with "No Module subclass found in file";
the agent says which file and what is missing, in one line, and serves the rest.
"""

from __future__ import annotations

import sys
from pathlib import Path

import httpx

from tests._support import (
    CLI_STOP_TIMEOUT,
    ROOT,
    TLS,
    ServerProcess,
    free_port,
    stop_process,
    wait_http,
)

GOOD = """
from pydantic import BaseModel


class Text(BaseModel):
    text: str


class Echo:
    input_schema = Text
    output_schema = Text
    description = "Echo the text"

    def execute(self, inputs, context):
        return inputs
"""

# docs/lifecycle.md's Book before issue 34: no output_schema
NO_OUTPUT = """
from pydantic import BaseModel


class BookInput(BaseModel):
    destination: str


class Book:
    input_schema = BookInput
    description = "Book a trip"

    def execute(self, inputs, context):
        return {"booked": inputs["destination"]}
"""

FUNCTION = """
from apcore import module


@module(description="Shout")
def shout(text: str) -> str:
    return text.upper()
"""


def test_skipped_module_files_are_named_with_what_they_lack(tmp_path: Path) -> None:
    folder = tmp_path / "extensions" / "demo"
    folder.mkdir(parents=True)
    (folder / "echo.py").write_text(GOOD)
    (folder / "book.py").write_text(NO_OUTPUT)
    (folder / "shout.py").write_text(FUNCTION)
    port = free_port()
    cmd = [sys.executable, "-m", "apcore_a2a", "serve", "--port", str(port)]
    proc = ServerProcess([*cmd, "--extensions-dir", str(tmp_path / "extensions")], cwd=ROOT)
    url = f"http://127.0.0.1:{port}/.well-known/agent-card.json"
    try:
        wait_http(url, proc=proc)
        skills = [skill["id"] for skill in httpx.get(url, timeout=30, verify=TLS).json()["skills"]]
    finally:
        stop_process(proc, timeout=CLI_STOP_TIMEOUT)
    lines = proc.output().splitlines()
    assert skills == ["demo.echo"]
    (book,) = [line for line in lines if "Not serving" in line and "book.py" in line]
    assert "class Book has no output_schema" in book
    (shout,) = [line for line in lines if "Not serving" in line and "shout.py" in line]
    assert "@module functions (shout) are not picked up from an extensions folder" in shout
    assert not [line for line in lines if "Not serving" in line and "echo.py" in line]
