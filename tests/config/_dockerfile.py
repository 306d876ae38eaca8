"""A small Dockerfile reader, so tests can replay the image's install and command."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Stage:
    name: str
    base: str
    args: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    #: ("RUN", command) and ("COPY", (sources, dest, from_stage)) in file order.
    steps: list[tuple[str, object]] = field(default_factory=list)
    workdir: str = "/"
    user: str = "root"
    expose: list[str] = field(default_factory=list)
    healthcheck: list[str] = field(default_factory=list)
    healthcheck_options: dict[str, str] = field(default_factory=dict)
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    stopsignal: str = "SIGTERM"


def instructions(text: str) -> list[tuple[str, str]]:
    """(KEYWORD, rest) per instruction, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    buffer = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not buffer and (not line or line.startswith("#")):
            continue
        if buffer and line.startswith("#"):
            continue
        if line.endswith("\\"):
            buffer += line[:-1] + " "
            continue
        buffer += line
        keyword, _, rest = buffer.strip().partition(" ")
        out.append((keyword.upper(), rest.strip()))
        buffer = ""
    return out


def _substitute(value: str, variables: dict[str, str]) -> str:
    return re.sub(
        r"\$\{(\w+)\}|\$(\w+)",
        lambda m: variables.get(m.group(1) or m.group(2), m.group(0)),
        value,
    )


def _pairs(rest: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in shlex.split(rest))


def parse(path: Path) -> list[Stage]:
    """The stages of the Dockerfile at *path*, with ARG defaults applied."""
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for keyword, rest in instructions(path.read_text(encoding="utf-8")):
        stage = stages[-1] if stages else None
        if keyword == "ARG":
            name, _, default = rest.partition("=")
            target = stage.args if stage else global_args
            target[name] = default
        elif keyword == "FROM":
            words = rest.split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else str(len(stages))
            stages.append(Stage(name=name, base=_substitute(words[0], global_args)))
        elif stage is None:
            continue
        elif keyword == "ENV":
            for key, value in _pairs(rest).items():
                stage.env[key] = _substitute(value, {**stage.args, **stage.env})
        elif keyword == "RUN":
            command = re.sub(r"^(--\w+=\S+\s+)+", "", rest)
            stage.steps.append(("RUN", command))
        elif keyword == "COPY":
            words = shlex.split(rest)
            flags = {
                w[2:].split("=", 1)[0]: w.split("=", 1)[1] for w in words if w.startswith("--")
            }
            paths = [w for w in words if not w.startswith("--")]
            stage.steps.append(("COPY", (paths[:-1], paths[-1], flags.get("from"))))
        elif keyword == "WORKDIR":
            stage.workdir = rest
        elif keyword == "USER":
            stage.user = rest
        elif keyword == "EXPOSE":
            stage.expose += rest.split()
        elif keyword == "STOPSIGNAL":
            stage.stopsignal = rest
        elif keyword == "HEALTHCHECK":
            options, _, command = rest.partition("CMD ")
            stage.healthcheck_options = _pairs(options.replace("--", ""))
            stage.healthcheck = json.loads(command)
        elif keyword == "ENTRYPOINT":
            stage.entrypoint = json.loads(rest)
        elif keyword == "CMD":
            stage.cmd = json.loads(rest)
    return stages


def dockerignore_allows(ignore_file: Path, relative: str) -> bool:
    """Whether *relative* reaches the build context (last matching pattern wins)."""
    import fnmatch

    allowed = True
    for raw in ignore_file.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line.lstrip("!").rstrip("/")
        parts = Path(relative).parts
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if any(
            fnmatch.fnmatch(p, pattern) or fnmatch.fnmatch(p, pattern.replace("**/", ""))
            for p in prefixes
        ):
            allowed = negate
    return allowed
