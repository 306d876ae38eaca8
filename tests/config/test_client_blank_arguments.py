"""The client commands refuse an empty or blank argument before any request, with one line
naming it and exit 2 (bad command input, ``--help``'s codes): read as "not given",
``--token ""`` sent no credentials, ``--skill ""`` let the agent pick the skill and
``--context-id ""`` started a new conversation, all silently. The agent's URL is a port
nothing listens on: a command that went ahead would exit 3 (cannot be reached)."""

from __future__ import annotations

import pytest

from tests._support import free_port

from ._helpers import run_cli

URL = f"http://127.0.0.1:{free_port()}"
CALL = ["call", URL, "--text", "hi"]
BLANK = [
    ([*CALL, "--token", ""], "--token: must not be empty (leave it out), got ''"),
    ([*CALL, "--skill", " "], "--skill: must not be empty (leave it out), got ' '"),
    ([*CALL, "--context-id", ""], "--context-id: must not be empty (leave it out), got ''"),
    ([*CALL, "--task-id", "\t"], "--task-id: must not be empty (leave it out), got '\\t'"),
    # Quoted as given: "  " was shown as ' ', a value the caller did not give.
    ([*CALL, "--skill", "  "], "--skill: must not be empty (leave it out), got '  '"),
    (["task", "get", URL, " \t  "], "TASK_ID: must not be empty, got ' \\t  '"),
    (["call", URL, "--text", ""], "--text: must not be empty (leave it out), got ''"),
    (["call", URL, "--file", ""], "--file: must not be empty (leave it out), got ''"),
    (["card", URL, "--verify", "--keys", ""], "--keys: must not be empty (leave it out), got ''"),
    (["call", "", "--text", "hi"], "URL: must not be empty, got ''"),
    (["task", "get", URL, " "], "TASK_ID: must not be empty, got ' '"),
    # quoted as given: three spaces are not shown as one
    (["task", "cancel", URL, "   "], "TASK_ID: must not be empty, got '   '"),
    (["push", "set", URL, "t-1", ""], "WEBHOOK_URL: must not be empty, got ''"),
    (
        ["push", "set", URL, "t-1", URL, "--id", ""],
        "--id: must not be empty (leave it out), got ''",
    ),
    (["push", "get", URL, "t-1", ""], "CONFIG_ID: must not be empty, got ''"),
    (
        [*CALL, "--header", "X-Api-Key: k", "--header", " "],
        "--header: must not hold an empty value",
    ),
]


@pytest.mark.parametrize(("args", "said"), BLANK, ids=[said.split(":")[0] for _, said in BLANK])
def test_a_blank_argument_is_refused_in_one_line_naming_it(args: list[str], said: str) -> None:
    result = run_cli(*args)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr == f"error: {said}\n"
