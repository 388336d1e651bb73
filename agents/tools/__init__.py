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
]


def default_tools(*, latency_s: float = 0.0) -> list[BaseTool]:
    """Return the bundled tools, in a fixed order: travel search, weather, B&B, maths, time.

    The list is new on every call; the tools in it are shared, stateless instances.
    ``latency_s`` > 0 makes each call wait that long first (a simulated API latency, see
    :func:`agents.tools.base.with_latency`).
    """
    tools = [search_travel_info, weather_forecast, check_bnb_availability, calculator, current_time]
    return [with_latency(tool, latency_s) for tool in tools]
