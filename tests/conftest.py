"""Suite-wide test configuration."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# Property tests explore new inputs on a developer's machine but are repeatable in CI:
# a CI run must pass or fail for the code, not for the draw.
settings.register_profile(
    "ci", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
