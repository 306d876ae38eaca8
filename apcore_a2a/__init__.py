"""apcore-a2a: serve an apcore module registry as an A2A agent."""

from apcore_a2a._version import __version__

__all__ = ["__version__"]
