"""Binding targets load from the binding folder without touching ``sys.path`` (issue 42
item 1: the folder used to be inserted at the front of ``sys.path`` for good, so a file
there could shadow any module imported later anywhere in the process)."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

from apcore_a2a.config import ConfigFileError, ModuleSources


def _bindings(folder: Path, module: str, source: str, target: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{module}.py").write_text(source, encoding="utf-8")
    (folder / "tools.binding.yaml").write_text(
        'spec_version: "1.0"\nbindings:\n'
        f"  - module_id: tools.initials\n    target: {target}\n    description: Initials\n",
        encoding="utf-8",
    )


def test_a_target_beside_the_yaml_loads_and_sys_path_is_unchanged(tmp_path: Path) -> None:
    name = f"tools_{uuid.uuid4().hex[:8]}"
    source = "def initials(name: str) -> str:\n    return ''.join(w[0] for w in name.split())\n"
    _bindings(tmp_path / "bindings", name, source, f"{name}:initials")
    before = list(sys.path)
    executor = ModuleSources(bindings_dirs=(str(tmp_path / "bindings"),)).build_executor()
    assert sys.path == before
    assert executor.call("tools.initials", {"name": "ada lovelace"}) == {"result": "al"}


def test_a_package_target_beside_the_yaml_loads(tmp_path: Path) -> None:
    name = f"pkg_{uuid.uuid4().hex[:8]}"
    package = tmp_path / "bindings" / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "text.py").write_text(
        "from .words import first\n\n\ndef initials(name: str) -> str:\n"
        "    return ''.join(first(w) for w in name.split())\n",
        encoding="utf-8",
    )
    (package / "words.py").write_text("def first(w: str) -> str:\n    return w[0]\n")
    _bindings(tmp_path / "bindings", "unused", "", f"{name}.text:initials")
    before = list(sys.path)
    executor = ModuleSources(bindings_dirs=(str(tmp_path / "bindings"),)).build_executor()
    assert sys.path == before
    assert executor.call("tools.initials", {"name": "grace hopper"}) == {"result": "gh"}


def test_a_target_that_cannot_be_imported_is_one_line(tmp_path: Path) -> None:
    name = f"broken_{uuid.uuid4().hex[:8]}"
    _bindings(tmp_path / "bindings", name, "import no_such_module_here\n", f"{name}:f")
    with pytest.raises(ConfigFileError) as refused:
        ModuleSources(bindings_dirs=(str(tmp_path / "bindings"),)).build_executor()
    assert str(refused.value) == "bindings: No module named 'no_such_module_here'"
    assert name not in sys.modules
