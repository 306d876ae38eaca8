"""``apcore-a2a push set | get | list | delete``: a task's push configs, as JSON on stdout
(one config per line; ``delete`` prints nothing), with the agent's delivery ``status`` and
``statusReason`` when it reports them. Failures are one line on stderr, exit 1 (refused),
2 (bad input) or 3 (unreachable)::

    apcore-a2a push set http://127.0.0.1:8000 TASK_ID http://127.0.0.1:9000/webhook \\
        --id mine --notification-token s3cret
"""

from __future__ import annotations

import argparse
from typing import Any

from apcore_a2a.cli.client import _command, _emit, _run
from apcore_a2a.client import A2AClient

__all__ = ["register"]


def _config(args: argparse.Namespace) -> dict[str, Any]:
    config: dict[str, Any] = {"url": args.webhook}
    if args.id:
        config["id"] = args.id
    if args.notification_token:
        config["token"] = args.notification_token
    if args.auth:
        scheme, _, credentials = args.auth.strip().partition(" ")
        if not scheme or not credentials.strip():
            raise ValueError("--auth must look like 'SCHEME CREDENTIALS', e.g. 'Bearer abc'")
        config["authentication"] = {"scheme": scheme, "credentials": credentials.strip()}
    return config


def _cmd_push(args: argparse.Namespace) -> int:
    async def body(client: A2AClient) -> None:
        if args.action == "set":
            _emit(await client.set_push_config(args.task_id, _config(args)))
        elif args.action == "get":
            _emit(await client.get_push_config(args.task_id, args.config_id))
        elif args.action == "list":
            for config in await client.list_push_configs(args.task_id):
                _emit(config)
        else:
            await client.delete_push_config(args.task_id, args.config_id)

    return _run(args, body)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``push`` subcommand group to the ``apcore-a2a`` parser."""
    push = subparsers.add_parser(
        "push", help="register, read and delete a task's push notification configs"
    )
    actions = push.add_subparsers(dest="action", metavar="ACTION", required=True)

    set_ = _command(
        actions, "set", "register a webhook for a task and print the config", _cmd_push, "task_id"
    )
    set_.add_argument("webhook", metavar="WEBHOOK_URL", help="URL the agent POSTs updates to")
    set_.add_argument("--id", metavar="ID", help="config id (default: chosen by the agent)")
    set_.add_argument(
        "--notification-token", metavar="T", help="sent back as X-A2A-Notification-Token"
    )
    set_.add_argument(
        "--auth",
        metavar="'SCHEME CREDENTIALS'",
        help="sent back as 'Authorization: SCHEME CREDENTIALS' with every delivery",
    )
    _command(actions, "get", "print one config of a task", _cmd_push, "task_id", "config_id")
    _command(actions, "list", "print every config of a task, one per line", _cmd_push, "task_id")
    _command(actions, "delete", "delete one config of a task", _cmd_push, "task_id", "config_id")
