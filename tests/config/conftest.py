"""The image installed once per test session (see _image.py)."""

from __future__ import annotations

import pytest

from ._image import ImageRoot


@pytest.fixture(scope="session")
def image(tmp_path_factory: pytest.TempPathFactory) -> ImageRoot:
    root = ImageRoot(tmp_path_factory.mktemp("image-root"))
    root.install()
    return root
