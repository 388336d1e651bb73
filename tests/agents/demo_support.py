"""Shared stand-in tools, tool results and helpers for the demo chat model's tests."""

from __future__ import annotations

import json
import operator
from datetime import date
from functools import reduce

from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langchain_core.tools import StructuredTool

from agents.models.demo import DemoChatModel

GARDENS_QUESTION = "推荐一个适合看江南园林的城市，查一下苏州天气，并找一个民宿房间。"
MIXED_QUESTION = "What's the weather in Hangzhou, and what is 17*23?"


# Stand-ins for the app's tools: same names, argument names and description keywords.
def search_travel_info(query: str) -> dict:
    """Search the bundled travel knowledge base about Chinese cities: sights, food, culture,
    best season; use to recommend a city or look up facts. Keywords: travel 旅游 recommend 推荐
    city 城市 sights 景点 gardens 园林 food 美食 culture"""
    return {}


def weather_forecast(town: str, days: int = 3) -> dict:
    """Return the weather forecast 天气 预报 temperature 气温 rain 下雨 for a town."""
    return {}


def check_bnb_availability(
    town: str,
    rooms: int = 1,
    check_in: date | None = None,
    nights: int = 1,
    guests: int | None = None,
) -> dict:
    """Check B&B 民宿 room 房间 hotel 住宿 availability in a town."""
    return {}


def calculator(expression: str) -> dict:
    """Evaluate an arithmetic math 计算 expression."""
    return {}


def current_time(timezone: str = "UTC") -> dict:
    """Return the current time 时间 now in a timezone or city."""
    return {}


TOOLS = [
    StructuredTool.from_function(f)
    for f in (
        search_travel_info,
        weather_forecast,
        check_bnb_availability,
        calculator,
        current_time,
    )
]

SEARCH_RESULT = {
    "query": "江南园林",
    "results": [
        {
            "city": "Suzhou",
            "title": "Classical Gardens",
            "snippet": "Suzhou's classical gardens, such as the Humble Administrator's Garden, "
            "are UNESCO World Heritage sites.",
            "score": 3.5,
        },
        {
            "city": "Hangzhou",
            "title": "West Lake",
            "snippet": "A lake ringed by hills.",
            "score": 1,
        },
    ],
}
WEATHER_RESULT = {
    "town": "Suzhou",
    "forecast": [
        {"date": "2025-05-01", "condition": "light rain", "temp_min_c": 17, "temp_max_c": 24},
        {"date": "2025-05-02", "condition": "cloudy", "temp_min_c": 18, "temp_max_c": 26},
    ],
}
BNB_RESULT = {
    "town": "Suzhou",
    "listings": [
        {"name": "Lotus Courtyard", "available": False, "price_per_night_cny": 520},
        {"name": "Pingjiang Lane Inn", "available": True, "price_per_night_cny": 480},
    ],
}


def calls_of(message: AIMessage) -> list[tuple[str, dict]]:
    return [(call["name"], call["args"]) for call in message.tool_calls]


def without_ids(calls: list[dict]) -> list[dict]:
    """Return tool calls without their ids (random, as a provider's are)."""
    return [{k: v for k, v in call.items() if k != "id"} for call in calls]


def merged(chunks: list[AIMessageChunk]) -> AIMessageChunk:
    return reduce(operator.add, chunks)


def results_turn(question: str) -> list:
    """Return a conversation that ends with the results of the gardens question's calls."""
    request = DemoChatModel().bind_tools(TOOLS).invoke([HumanMessage(question)])
    contents = {
        "search_travel_info": json.dumps(SEARCH_RESULT, ensure_ascii=False),
        "weather_forecast": json.dumps(WEATHER_RESULT),
        "check_bnb_availability": json.dumps(BNB_RESULT),
        "calculator": json.dumps({"expression": "17*23", "result": 391}),
    }
    results = [
        ToolMessage(contents[c["name"]], tool_call_id=c["id"], name=c["name"])
        for c in request.tool_calls
    ]
    return [HumanMessage(question), request, *results]
