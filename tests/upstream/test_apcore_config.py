"""The apcore behaviour ``apcore_a2a/upstream/apcore_accessors.py`` answers with
``config_of``: an ``Executor`` and a ``Registry`` keep their ``Config`` privately, with no
accessor. A failure here means apcore exposes it now: read it there and delete
``config_of``."""

from __future__ import annotations

from apcore import Config, Executor, Registry

from apcore_a2a.upstream.apcore_accessors import config_of


def test_executor_and_registry_have_no_public_config() -> None:
    config = Config(data={"project": {"name": "calc", "version": "1.2.0"}})
    registry = Registry(config=config)
    executor = Executor(registry, config=config)
    for owner in (executor, registry):
        assert not hasattr(type(owner), "config"), "apcore has a public config accessor now"
        assert config_of(owner) is config
        assert config_of(owner).get("project.name") == "calc"
