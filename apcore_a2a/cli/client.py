"""Client commands of ``apcore-a2a``: ``card``, ``call``, ``task get|cancel|resubscribe``
(``push``: ``cli/push.py``, on :func:`command`).

Each command prints JSON on stdout (the card indented, anything else one object a line)
and, on failure, one line on stderr with a non-zero exit code (:data:`EXIT_CODES`). ``call``
waits as long as the task runs (``--timeout`` bounds it), streaming when the agent can, and
after 2 s shows ``task ID: STATE, N s`` on stderr while it waits. ``task resubscribe``
follows a running task's stream (``SubscribeToTask``) to its end, printing each event, and
exits as ``call`` does by the state the task ends in.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import mimetypes
import shlex
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from apcore_a2a.adapters.skills import SCHEMA_EXTENSION_URI as SCHEMA_EXTENSION
from apcore_a2a.cli import emit, positive, printable, refuse_blank

if TYPE_CHECKING:  # the client stack loads when a client command runs, not for serve
    from apcore_a2a.client import A2AClient

#: ``call``, ``task resubscribe``: the task ended in one of these states (its JSON is
#: printed all the same)
EXIT_TASK_STATES = {"failed": 7, "rejected": 8, "canceled": 9}
#: what each exit code of the client commands means (shown by ``--help``)
EXIT_CODES = """exit codes:
  0  done (call: the task completed, or waits for input; card, task: printed)
  1  the agent answered with an A2A error (unknown skill, invalid input, ...)
  2  bad command input
  3  the agent cannot be reached or has no usable card
  4  card --verify: the card's signature is missing or does not verify
  5  the agent refused the credentials (HTTP 401/403): see --token, --header
  6  call, task resubscribe: the task still runs when --timeout ends, or when the
     agent's answer ends before the task does (its id is printed)
  7  call, task resubscribe: the task failed
  8  call, task resubscribe: the agent rejected it
  9  call, task resubscribe: it was canceled
130  interrupted (Ctrl-C); a task already sent runs on"""

#: the longest error or waiting line printed (the agent's words are cut there)
MAX_ERROR_LINE = 2000


def _printed_line(text: str) -> str:
    """*text* as one printable line of at most :data:`MAX_ERROR_LINE` characters (then
    ``... (cut)``): the agent's words in it (a message, a task id) may run to megabytes."""
    line = printable(text)
    return line[:MAX_ERROR_LINE] + "... (cut)" if len(line) > MAX_ERROR_LINE else line


class Exit(Exception):
    """Ends a command with exit *code* and its message as the one line on stderr."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _client(args: argparse.Namespace, timeout: float | None) -> A2AClient:
    from apcore_a2a.client import A2AClient, CardVerificationError

    headers: dict[str, str] = {}
    for item in args.header or []:
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            # Not repeated: the value is often a credential.
            raise ValueError("--header must look like 'Name: value' (a colon after the name)")
        headers[name.strip()] = value.strip()
    keys: Any = getattr(args, "keys", None)
    if keys is not None:  # a JWKS or JWK (JSON) or a PEM public key
        if not args.verify:
            raise ValueError("--keys needs --verify")
        try:
            keys = Path(args.keys).read_text(encoding="utf-8")
            keys = json.loads(keys) if keys.lstrip().startswith(("{", "[")) else keys
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or exc
            raise ValueError(f"cannot read --keys {args.keys}: {reason}") from None
        except ValueError as exc:
            raise ValueError(f"--keys {args.keys} is not valid JSON: {exc}") from exc
    try:
        return A2AClient(
            args.url,
            auth=args.token,
            timeout=timeout,
            protocol=args.protocol,
            headers=headers,
            allow_other_origins=args.allow_other_origins,
            verify_card=bool(getattr(args, "verify", False)),
            card_keys=keys,
        )
    except CardVerificationError as exc:  # keys that verify nothing are bad input
        raise ValueError(f"--keys: {exc.message}") from None


def _run(args: argparse.Namespace) -> int:
    """Run the command's body with a client; every failure is one stderr line + exit code.
    ``--timeout`` bounds each request, but a command that waits for its task (``call``,
    ``task resubscribe``): it bounds the whole wait."""
    from apcore_a2a.client import errors as e

    #: the exit code of each failure, the first that matches
    exits: list[tuple[type[Exception] | tuple[type[Exception], ...], int]] = [
        (e.A2ARemoteError, 1),
        (e.CardVerificationError, 4),
        (e.A2AAuthenticationError, 5),
        ((e.A2AConnectionError, e.A2ADiscoveryError), 3),
        (e.A2AClientError, 1),
        ((ValueError, TypeError), 2),
    ]

    async def main() -> None:
        async with _client(args, None if args.waits else args.timeout) as client:
            await args.body(client, args)

    # httpx logs every request at INFO, and a2a-sdk warns about what it reads of the agent's
    # (a card it finds incomplete, each member it misses); the commands' output is the JSON
    # and the one line that says what went wrong, not a log.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("a2a").setLevel(logging.ERROR)
    try:
        refuse_blank(args)
    except ValueError as exc:
        # Not through printable(): the value is quoted by repr (every control escaped), and
        # collapsing its spaces would quote back a value the caller did not give ("  ").
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(main())
    except (Exit, e.A2AClientError, ValueError, TypeError) as exc:
        said = str(exc)
        if isinstance(exc, e.A2AClientError):
            detail = getattr(exc, "code", None) or getattr(exc, "reason", None)
            said = type(exc).__name__ + (f" ({detail})" if detail else "") + f": {exc.message}"
        print(f"error: {_printed_line(said)}", file=sys.stderr)
        return (
            exc.code if isinstance(exc, Exit) else next(c for k, c in exits if isinstance(exc, k))
        )
    return 0


def skills_of(card: dict[str, Any]) -> list[dict[str, Any]]:
    """The card's skills, each with what the schema extension publishes for it
    (``inputSchema``, ``outputSchema``, ``annotations``, ...) in its own entry."""
    from apcore_a2a.client.card import extension, objects

    published = _member(extension(card, SCHEMA_EXTENSION), "params").get("skills")
    # The skill's own fields first (id, name, ...), then what the extension adds.
    return [
        dict(skill)
        | {k: v for k, v in _member(published, skill.get("id")).items() if k not in skill}
        for skill in objects(card.get("skills"))
    ]


def _member(value: Any, key: Any) -> dict[str, Any]:
    """``value[key]`` when both are JSON objects, else ``{}`` (a card is the agent's data)."""
    found = value.get(key) if isinstance(value, dict) and isinstance(key, str) else None
    return found if isinstance(found, dict) else {}


async def _card(client: A2AClient, args: argparse.Namespace) -> None:
    card = await client.discover()
    emit(skills_of(card) if args.skills else card, indent=2)
    if args.verify:
        print("card signature verified", file=sys.stderr)


def _message_from(args: argparse.Namespace) -> Any:
    if args.text is not None:
        return args.text
    if args.data is not None:
        try:
            return {"parts": [{"data": json.loads(args.data)}]}
        except ValueError as exc:
            raise ValueError(f"--data is not valid JSON: {exc}") from exc
    path = Path(args.file)
    try:
        content = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read --file {path}: {exc.strerror or exc}") from exc
    media_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return {"parts": [{"raw": content, "mediaType": media_type, "filename": path.name}]}


async def _call(client: A2AClient, args: argparse.Namespace) -> None:
    message = _message_from(args)
    options = {"context_id": args.context_id, "task_id": args.task_id, "skill_id": args.skill}
    last: dict[str, Any] = {}
    if args.stream or args.no_wait:
        try:  # --timeout bounds the whole wait here too (_wait_for bounds its own)
            async with asyncio.timeout(args.timeout):
                if args.stream:
                    async for last in client.stream_message(message, **options):
                        emit(last)
                else:
                    last = await client.send_message(message, return_immediately=True, **options)
                    emit(last)
        except TimeoutError:
            task_id = last.get("id") if last.get("kind") == "task" else last.get("taskId")
            state = (last.get("status") or {}).get("state") or "working"
            raise _timed_out(args, client.url, task_id, state) from None
    else:
        emit(last := await _wait_for(client, message, options, args))
    _exit_by_state(last, None if args.no_wait else (args, client.url))


def _exit_by_state(last: dict[str, Any], waited: tuple[argparse.Namespace, str] | None) -> None:
    """Exit 7, 8 or 9 when *last* (the task, or the last event of its stream, printed
    already) says the task ended failed, rejected or canceled; the agent's message says why.
    When the command *waited* for the end (its arguments, the agent's URL), exit 6 for a
    task that has not ended nor waits for input: the agent's answer ended first."""
    from apcore_a2a.client._shapes import FINAL_STATES, INTERRUPTED_STATES

    state = (last.get("status") or {}).get("state")
    done = state is None or state in FINAL_STATES | INTERRUPTED_STATES  # None: a message
    if waited is not None and not done:
        args, url = waited
        task_id = last.get("id") or last.get("taskId")
        ended = f"the agent's answer ended before task {task_id} did (it is {state})"
        raise _timed_out(args, url, task_id, str(state), ended)
    if state in EXIT_TASK_STATES:
        parts = (last["status"]["message"] or {}).get("parts") or []
        said = " ".join(str(part.get("text") or "") for part in parts).strip()
        ended = f"task {last.get('id') or last.get('taskId')} {state}"
        raise Exit(EXIT_TASK_STATES[state], ended + (f": {said}" if said else ""))


class _Progress:
    """The waiting line on stderr: task id, state, elapsed time (after a quiet first 2 s).

    On a terminal it is redrawn in place every second; elsewhere a line is written when
    the state changes and every 30 s.
    """

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.task_id: str | None = None
        self.state = "submitted"
        self._shown: tuple[str, float] | None = None
        self._tty = sys.stderr.isatty()

    def update(self, task_id: str | None = None, state: str | None = None) -> None:
        self.task_id = task_id or self.task_id
        self.state = state or self.state
        elapsed = time.monotonic() - self.started
        if elapsed < 2 or self.task_id is None:
            return
        shown = self._shown
        if shown and not self._tty and shown[0] == self.state and elapsed - shown[1] < 30:
            return
        self._shown = (self.state, elapsed)
        line = _printed_line(f"task {self.task_id}: {self.state}, {elapsed:.0f} s")
        sys.stderr.write(f"\r\x1b[2K{line}" if self._tty else line + "\n")
        sys.stderr.flush()

    def done(self) -> None:
        if self._tty and self._shown is not None:
            sys.stderr.write("\r\x1b[2K")
            sys.stderr.flush()


async def _wait_for(
    client: A2AClient, message: Any, options: dict[str, Any], args: argparse.Namespace
) -> Any:
    """Send and wait for the answer, streaming when the agent can, to show progress."""
    from apcore_a2a.client import A2AClientError

    progress = _Progress()

    async def follow() -> Any:
        card = await client.discover()
        if _member(card, "capabilities").get("streaming") is not True:
            return await client.send_message(message, **options)
        async for event in client.stream_message(message, **options):
            if event["kind"] == "message" and progress.task_id is None:
                return event
            task_id = event.get("id") if event["kind"] == "task" else event.get("taskId")
            progress.update(task_id, (event.get("status") or {}).get("state"))
        if progress.task_id is None:
            raise A2AClientError("the agent's stream ended without a task")
        return await client.get_task(progress.task_id)

    async def tick() -> None:
        while True:
            await asyncio.sleep(1)
            progress.update()

    ticker = asyncio.create_task(tick())
    try:
        async with asyncio.timeout(args.timeout):
            return await follow()
    except TimeoutError:
        raise _timed_out(args, client.url, progress.task_id, progress.state) from None
    finally:
        ticker.cancel()
        progress.done()


def _timed_out(
    args: argparse.Namespace, url: str, task_id: str | None, state: str, ended: str = ""
) -> Exit:
    """Exit 6: ``--timeout`` (or the agent, *ended* saying how) ended the wait; the task
    (when it is known) runs on at *url* (the agent's, without the credentials it may have
    carried)."""
    waited = f"after --timeout {args.timeout or 0:g} s"
    said = f"no answer from the agent {waited}; a longer --timeout waits longer"
    if task_id is not None:
        # Quoted for the shell: the id is the agent's, and the command is made to be pasted.
        following = args.command == "task"  # resubscribe: again, with a longer --timeout
        action = "resubscribe" if following else "get"
        again = shlex.join(["apcore-a2a", "task", action, url, task_id])
        hint = "" if following or ended else " (start long work with --no-wait)"
        ended = ended or f"task {task_id} is still {state} {waited}"
        said = f"{ended}; it runs on{hint}: follow it with: {again}"
    return Exit(6, said)


async def _task(client: A2AClient, args: argparse.Namespace) -> None:
    if args.action == "get":
        emit(await client.get_task(args.task_id, history_length=args.history_length))
    else:
        emit(await client.cancel_task(args.task_id))


async def _resubscribe(client: A2AClient, args: argparse.Namespace) -> None:
    """Each event of the task's stream, from the task as it is now to the final one."""
    last: dict[str, Any] = {}
    try:
        async with asyncio.timeout(args.timeout):
            async for last in client.resubscribe(args.task_id):
                emit(last)
    except TimeoutError:
        state = (last.get("status") or {}).get("state") or "working"
        raise _timed_out(args, client.url, args.task_id, state) from None
    _exit_by_state(last, (args, client.url))


def command(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    help: str,
    body: Callable[[A2AClient, argparse.Namespace], Awaitable[None]],
    *positionals: str,
) -> argparse.ArgumentParser:
    """A client command: URL, *positionals* and the connection options every one takes."""
    parser = subparsers.add_parser(
        name, help=help, epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    # refuse_blank (cli/__init__.py) names these as the usage shows them (URL, TASK_ID...)
    parser.set_defaults(func=_run, body=body, positionals=("url", *positionals), waits=False)
    parser.add_argument("url", metavar="URL", help="base URL of the agent")
    for positional in positionals:
        parser.add_argument(positional, metavar=positional.upper())
    parser.add_argument("--token", help="bearer token sent as 'Authorization: Bearer TOKEN'")
    parser.add_argument(
        "--header",
        action="append",
        metavar="'NAME: VALUE'",
        help="extra HTTP header, e.g. an API key (repeatable)",
    )
    parser.add_argument(
        "--protocol",
        choices=("auto", "1.0", "0.3"),
        default="auto",
        help="A2A protocol version (default: from the agent card)",
    )
    parser.add_argument(
        "--timeout",
        type=positive,
        default=None,
        metavar="SECONDS",
        help="give up after this long (call, task resubscribe: on the whole wait for the "
        "task; default: wait as long as the task runs)",
    )
    parser.add_argument(
        "--allow-other-origins",
        action="store_true",
        help="follow card interface URLs on another origin (credentials are never sent there)",
    )
    return parser


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the client subcommands (``card``, ``call``, ``task``, ``push``) to the parser."""
    card = command(subparsers, "card", "print an agent's card as JSON", _card)
    card.add_argument(
        "--verify",
        action="store_true",
        help="require a valid A2A signature (keys: the agent's /.well-known/jwks.json); "
        "prints the signed card, exit 4 when it does not verify",
    )
    card.add_argument(
        "--skills",
        action="store_true",
        help="print the skills only, each with its input and output JSON Schema",
    )
    card.add_argument(
        "--keys",
        metavar="FILE",
        help="with --verify: verify with these keys (JWKS or JWK JSON, or a PEM public key)",
    )
    call = command(
        subparsers,
        "call",
        "send a message to an agent and print the task (or each streamed event)",
        _call,
    )
    call.set_defaults(waits=True)
    call.add_argument("--skill", metavar="ID", help="skill to run (message.metadata.skillId)")
    source = call.add_mutually_exclusive_group(required=True)
    source.add_argument("--text", metavar="T", help="send a text part")
    source.add_argument("--data", metavar="JSON", help="send a data part (a JSON value)")
    source.add_argument("--file", metavar="PATH", help="send a file part")
    wait = call.add_mutually_exclusive_group()
    wait.add_argument("--stream", action="store_true", help="stream events, one JSON per line")
    wait.add_argument(
        "--no-wait",
        action="store_true",
        help="return the task as soon as it is created (returnImmediately); "
        "follow it with 'task get'",
    )
    call.add_argument("--context-id", metavar="ID", help="continue this conversation")
    call.add_argument("--task-id", metavar="ID", help="continue this task (e.g. input-required)")

    task = subparsers.add_parser("task", help="get, cancel or follow a task")
    actions = task.add_subparsers(dest="action", metavar="ACTION", required=True)
    get = command(actions, "get", "print a task as JSON", _task, "task_id")
    get.add_argument("--history-length", type=int, metavar="N", help="last N history messages")
    command(actions, "cancel", "cancel a task and print it", _task, "task_id")
    follow = command(
        actions,
        "resubscribe",
        "follow a running task's events to its end, one JSON per line",
        _resubscribe,
        "task_id",
    )
    follow.set_defaults(waits=True)
