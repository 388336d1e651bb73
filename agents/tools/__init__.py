"""The agent's bundled tools: offline, deterministic and free of Django.

Five LangChain tools, each a typed function with a pydantic argument model and a
description written for the model (when to use it, when not, what comes back):

- ``search_travel_info(query)``: keyword search over bundled notes on Chinese cities.
- ``weather_forecast(town, days=3)``: an offline, deterministic demo forecast.
- ``check_bnb_availability(town, rooms=1, check_in=None, nights=1, guests=None)``: offline
  demo B&B listings and availability.
- ``calculator(expression)``: arithmetic evaluated safely over ``ast``.
- ``current_time(timezone="UTC")``: the time now in an IANA zone or a known city.

All of them return JSON-serialisable dicts. Bad arguments raise pydantic's ValidationError
from ``invoke``; a tool that cannot answer raises ValueError with a message the model can
act on. See ``docs/tools.md``.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.tools import BaseTool

from agents.tools.base import with_latency
from agents.tools.calculator import calculator
from agents.tools.clock import current_time
from agents.tools.travel import check_bnb_availability, search_travel_info, weather_forecast

__all__ = [
    "calculator",
    "check_bnb_availability",
    "current_time",
    "default_tools",
    "search_travel_info",
    "weather_forecast",
    "with_simulated_latency",
]

# Each tool's simulated latency as a multiple of ``latency_s``. Real APIs differ: a
# booking search is the slow one of a trip's calls, arithmetic and the clock answer at
# once. So the demo's parallel calls end apart and a timeline shows which was slow.
LATENCY_FACTORS = {
    "search_travel_info": 1.0,
    "weather_forecast": 1.0,
    "check_bnb_availability": 3.0,
    "calculator": 0.25,
    "current_time": 0.25,
}


BUNDLED: tuple[BaseTool, ...] = (
    search_travel_info, weather_forecast, check_bnb_availability, calculator, current_time,
)  # fmt: skip


def default_tools(*, latency_s: float = 0.0) -> list[BaseTool]:
    """Return the bundled tools, in a fixed order: travel search, weather, B&B, maths, time.

    The list is new on every call; the tools in it are shared, stateless instances (the
    delayed ones too, one per tool and latency).
    ``latency_s``: see :func:`with_simulated_latency`.
    """
    return with_simulated_latency(BUNDLED, latency_s=latency_s)


def with_simulated_latency(tools: Sequence[BaseTool], *, latency_s: float) -> list[BaseTool]:
    """Return ``tools`` with each bundled one made to wait first, the others as they are.

    ``latency_s`` > 0 makes a bundled tool wait ``latency_s`` times its
    ``LATENCY_FACTORS`` entry (a simulated API latency, see
    :func:`agents.tools.base.with_latency`), so the B&B search takes three times as long as
    the others. Another agent's tools have latencies of their own.
    """
    bundled = {id(tool) for tool in BUNDLED}
    return [_delayed(tool, latency_s) if id(tool) in bundled else tool for tool in tools]


_DELAYED: dict[tuple[str, float], BaseTool] = {}


def _delayed(tool: BaseTool, latency_s: float) -> BaseTool:
    """Return bundled ``tool`` waiting ``latency_s`` times its factor, made once per process
    and latency: a tool made anew for every run had its schema (a pydantic model) built
    again for each of the run's requests and counts, about 9 ms of a demo run's CPU."""
    key = (tool.name, latency_s * LATENCY_FACTORS[tool.name])
    if key not in _DELAYED:
        _DELAYED[key] = with_latency(tool, key[1])
    return _DELAYED[key]
