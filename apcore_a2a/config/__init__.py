"""One YAML file for the whole agent (``apcore-a2a serve --config agent.yaml``)."""

from apcore_a2a.config.file import SECTIONS, AgentConfig, load_config
from apcore_a2a.config.sources import ConfigFileError, ModuleSources

__all__ = ["SECTIONS", "AgentConfig", "ConfigFileError", "ModuleSources", "load_config"]
