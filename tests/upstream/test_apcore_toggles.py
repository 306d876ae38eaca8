"""The apcore behaviour ``apcore_a2a/upstream/apcore_accessors.py`` answers with
``is_disabled``: an ``Executor`` keeps the toggle state of its module lookup privately, with
no accessor. A failure here means apcore exposes it now: read it there and delete
``is_disabled``."""

from __future__ import annotations

from apcore import APCore, Executor, Registry, ToggleState

from apcore_a2a.upstream.apcore_accessors import is_disabled


def test_an_executor_has_no_public_toggle_state() -> None:
    toggles = ToggleState()
    executor = Executor(Registry(), toggle_state=toggles)
    for name in ("toggle_state", "is_disabled", "is_module_disabled"):
        assert not hasattr(executor, name), f"apcore's Executor has {name} now"
    assert not is_disabled(executor, "demo.echo")
    toggles.disable("demo.echo")
    assert is_disabled(executor, "demo.echo")


def test_an_apcore_client_executor_reads_the_client_toggles() -> None:
    client = APCore()
    client.toggle_state.disable("demo.echo")
    assert is_disabled(client.executor, "demo.echo")
    assert not is_disabled(Executor(Registry()), "demo.echo")  # the process-wide default
