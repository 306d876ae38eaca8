"""Replay the Dockerfile without a container engine: same install, command and env vars.

Every absolute path the image uses (``/opt/venv``, ``/src``, ``/etc/apcore-a2a``, ``/app``,
``/data``) is moved under a temporary folder standing in for the image's file system;
nothing else changes. The build stage's ``RUN``/``COPY`` steps run as written (the pip
cache mount is the machine's pip cache); of the runtime stage's ``RUN`` only ``mkdir`` is
replayed (creating the ``app`` user is a container concern). YAML files copied into the
image have their image paths moved the same way.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests._support import ROOT

from ._dockerfile import Stage, parse

DOCKERFILE = ROOT / "Dockerfile"
IMAGE_PATHS = ("/opt/venv", "/src", "/etc/apcore-a2a", "/app", "/data")
# Absolute paths in the Dockerfile that are not part of the image's own tree.
SYSTEM_PATHS = ("/usr/sbin/nologin", "/root/.cache/pip")
_PATH = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, IMAGE_PATHS)) + r")(?=[/\s\"'\[:]|$)")


class ImageRoot:
    """The image's file system under *root*, built from the Dockerfile."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.build, self.runtime = parse(DOCKERFILE)
        self.bin = root / "host-bin"  # `python` on PATH, as in the python image

    def map(self, text: str) -> str:
        """*text* with the image's absolute paths moved under the temporary root."""
        return _PATH.sub(lambda m: f"{self.root}{m.group(1)}", text)

    def base_path(self) -> str:
        return os.pathsep.join([str(self.bin), "/usr/local/bin", "/usr/bin", "/bin"])

    def _stage_env(self, stage: Stage) -> dict[str, str]:
        env = {"PATH": self.base_path(), "HOME": os.environ.get("HOME", "/root")}
        for key, value in {**stage.args, **stage.env}.items():
            env[key] = self.map(value.replace("$PATH", env["PATH"]))
        return env

    def install(self) -> None:
        """Run the build stage, then the runtime stage's file steps."""
        self.bin.mkdir(parents=True)
        base_python = getattr(sys, "_base_executable", sys.executable)
        (self.bin / "python").symlink_to(base_python)
        for stage in (self.build, self.runtime):
            env = self._stage_env(stage)
            for kind, step in stage.steps:
                if kind == "COPY":
                    sources, dest, from_stage = step  # type: ignore[misc]
                    self._copy(sources, dest, from_stage)
                    continue
                command = str(step)
                if stage is self.runtime:
                    command = " && ".join(
                        part for part in command.split("&&") if part.strip().startswith("mkdir")
                    )
                done = subprocess.run(
                    ["sh", "-c", self.map(command)],
                    env=env,
                    cwd=self.root,
                    capture_output=True,
                    text=True,
                    timeout=600,
                )
                assert done.returncode == 0, f"RUN {command}:\n{done.stdout}\n{done.stderr}"

    def _copy(self, sources: list[str], dest: str, from_stage: str | None) -> None:
        target = Path(self.map(dest))
        for source in sources:
            origin = Path(self.map(source)) if from_stage else ROOT / source
            if from_stage and origin == target:
                continue  # both stages live in the same temporary root
            to = target / origin.name if dest.endswith("/") else target
            to.parent.mkdir(parents=True, exist_ok=True)
            if origin.is_dir():
                shutil.copytree(origin, to, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(origin, to)
                if to.suffix == ".yaml":  # the image's config names image paths too
                    to.write_text(self.map(to.read_text(encoding="utf-8")), encoding="utf-8")

    def env(self, **overrides: str) -> dict[str, str]:
        """The container's environment (image ENV), plus ``docker run -e`` *overrides*."""
        env = self._stage_env(self.runtime)
        env.pop("HOME")
        env["HOME"] = str(self.path(self.runtime.workdir))
        env.update(overrides)
        return env

    def path(self, image_path: str) -> Path:
        return Path(self.map(image_path))

    def command(self, *cmd: str) -> list[str]:
        """ENTRYPOINT + CMD (or *cmd* given to ``docker run IMAGE ...``), paths mapped."""
        return [self.map(word) for word in [*self.runtime.entrypoint, *(cmd or self.runtime.cmd)]]

    def healthcheck(self) -> list[str]:
        return [self.map(word) for word in self.runtime.healthcheck]

    def workdir(self) -> Path:
        return self.path(self.runtime.workdir)
