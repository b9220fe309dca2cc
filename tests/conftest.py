"""What the test modules share: the hypothesis profile every property test runs under.

The profile is deterministic (the same examples on every run, nothing read from or written to a database,
no deadline: compile times vary with the machine's load), so CI and a developer see the same cases.
``HYPOTHESIS_PROFILE=explore`` runs with random examples instead, for a developer looking for new bugs.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", derandomize=True, database=None, deadline=None,
                          suppress_health_check=list(HealthCheck))
settings.register_profile("explore", deadline=None, suppress_health_check=list(HealthCheck))
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
