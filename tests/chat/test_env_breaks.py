"""Trying to break the settings read from the environment (project/env.py).

``float()`` takes ``nan``: a NaN compares false with everything, so it passed every
``minimum`` and the heartbeat-versus-stale check. ``AGENT_HEARTBEAT_S=nan`` made the
heartbeat's sleep never end (asyncio timers at NaN fire at once or never), so another
process's sweep took every live run for dead after ``AGENT_STALE_AFTER_S``; a NaN tool or
model time-out fired at once or never. ``inf`` is refused with it.
"""

from __future__ import annotations

import pytest

from tests.test_deployment import run_python


@pytest.mark.parametrize("name", ["AGENT_HEARTBEAT_S", "AGENT_TOOL_TIMEOUT_S",
                                  "AGENT_MODEL_TIMEOUT_S", "AGENT_SHUTDOWN_GRACE_S"])  # fmt: skip
@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "1e999"])
def test_a_number_setting_that_is_not_finite_stops_start_up_with_a_clear_message(name, value):
    result = run_python("import django; django.setup()", **{name: value})
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert f"{name} must be" in result.stderr
