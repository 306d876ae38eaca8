"""A :class:`Settings` object passed to ``serve()``, ``async_serve()`` or the factory is
named as what it is in a refusal of one of its values, not as the config file's key: an
app that builds its settings in code has no ``storage.task_store`` to look for."""

from __future__ import annotations

import pytest

from apcore_a2a import A2AServerFactory, Settings, async_serve
from apcore_a2a.settings import SettingsError
from tests.foundation.modules import build_registry

PASSED = "of the settings passed in"


def _refusal(build: object, **values: object) -> str:
    settings = Settings.resolve(values, environ={})
    with pytest.raises(SettingsError) as caught:
        build(build_registry(), settings=settings, environ={})  # type: ignore[operator]
    return str(caught.value)


def _create(registry: object, **kwargs: object) -> object:
    return A2AServerFactory(registry, **kwargs).create()  # type: ignore[arg-type]


@pytest.mark.parametrize("build", [_create, async_serve])
def test_a_task_store_of_the_settings_object_is_named_so(build: object) -> None:
    said = _refusal(build, task_store="ftp://h/db")
    assert said.startswith(f"task_store {PASSED}: unsupported task store URL scheme"), said


def test_a_weak_jwt_secret_of_the_settings_object_is_named_so() -> None:
    said = _refusal(_create, auth_type="bearer", auth_key="short")
    assert said.startswith(f"auth_key {PASSED}: JWT HMAC secret is 5 bytes"), said
    assert "short" not in said


def test_an_explorer_prefix_of_the_settings_object_is_named_so() -> None:
    said = _refusal(_create, explorer=True, explorer_prefix="/x", rpc_path="/x/rpc")
    assert said.startswith(f"explorer_prefix {PASSED}: would hide"), said


def test_a_keyword_argument_beside_the_settings_object_is_named_as_itself() -> None:
    settings = Settings.resolve({"name": "calc"}, environ={})
    with pytest.raises(SettingsError) as caught:
        _create(build_registry(), settings=settings, environ={}, task_store="ftp://h/db")
    assert str(caught.value).startswith("task_store: unsupported"), caught.value


def test_a_variable_beside_the_settings_object_is_named_as_itself() -> None:
    settings = Settings.resolve({"name": "calc"}, environ={})
    with pytest.raises(SettingsError) as caught:
        _create(build_registry(), settings=settings, environ={"A2A_TASK_STORE": "ftp://h/db"})
    assert str(caught.value).startswith("A2A_TASK_STORE: unsupported"), caught.value
