"""The image installed once per test session (see _image.py), and a port already taken."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from ._image import ImageRoot


@pytest.fixture(scope="session")
def image(tmp_path_factory: pytest.TempPathFactory) -> ImageRoot:
    root = ImageRoot(tmp_path_factory.mktemp("image-root"))
    root.install()
    return root


@pytest.fixture
def taken_port() -> Iterator[str]:
    """A port another socket listens on: were a refused setting accepted, ``serve`` would
    stop there (exit 3) rather than serve until the test times out."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        yield str(listener.getsockname()[1])
