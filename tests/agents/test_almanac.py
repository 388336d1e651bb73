"""The bundled almanac MCP server, through agents.mcp over stdio as the demo runs it."""

from __future__ import annotations

import base64
import struct
import zlib
from contextlib import asynccontextmanager

import pytest
from langchain_core.tools import ToolException

from agents.bundled import almanac_config
from agents.mcp import open_mcp_tools
from tests.timing import WAIT_S


@asynccontextmanager
async def almanac_tools():
    """Yield the almanac's tools by name. Not a fixture: pytest-asyncio may tear an async
    fixture down in another task than set it up, and the MCP sessions must close in the
    task that opened them."""
    async with open_mcp_tools([almanac_config(connect_timeout_s=WAIT_S)]) as toolset:
        assert toolset.unavailable == {}
        yield {tool.name: tool for tool in toolset.tools}


async def structured(tool, args):
    """Return the tool's structured result (the ToolMessage's artifact)."""
    call = {"name": tool.name, "args": args, "id": "call_1", "type": "tool_call"}
    message = await tool.ainvoke(call)
    assert message.status == "success"
    return message.artifact["structured_content"]


async def test_the_almanac_offers_four_tools_with_descriptions_for_the_model():
    async with almanac_tools() as almanac:
        assert sorted(almanac) == ["almanac_bar_chart", "almanac_convert_units",
                                   "almanac_days_between", "almanac_moon_phase"]  # fmt: skip
        for tool in almanac.values():
            assert "Use it" in tool.description and "Returns" in tool.description


CONVERSIONS = [
    (26.2, "mi", "km", 42.1648, "length"),
    (1, "miles", "feet", 5280, "length"),
    (10, "lb", "kg", 4.53592, "mass"),
    (100, "C", "F", 212, "temperature"),
    (-40, "fahrenheit", "celsius", -40, "temperature"),
    (0, "K", "C", -273.15, "temperature"),
]


async def test_convert_units_converts_length_mass_and_temperature():
    async with almanac_tools() as almanac:
        convert = almanac["almanac_convert_units"]
        for value, source, target, result, quantity in CONVERSIONS:
            args = {"value": value, "from_unit": source, "to_unit": target}
            answer = await structured(convert, args)
            assert answer["result"] == pytest.approx(result), args
            assert answer["quantity"] == quantity


async def test_convert_units_refuses_units_of_different_quantities():
    async with almanac_tools() as almanac:
        with pytest.raises(ToolException, match="Known units: length: mm"):
            await almanac["almanac_convert_units"].ainvoke(
                {"value": 1, "from_unit": "kg", "to_unit": "km"}
            )
        with pytest.raises(ToolException, match="below absolute zero"):
            await almanac["almanac_convert_units"].ainvoke(
                {"value": -500, "from_unit": "C", "to_unit": "K"}
            )


async def test_days_between_counts_days_weeks_and_weekdays():
    async with almanac_tools() as almanac:
        answer = await structured(almanac["almanac_days_between"],
                                  {"start": "2024-02-27", "end": "2024-03-12"})  # fmt: skip
        assert answer == {"start": "2024-02-27", "end": "2024-03-12", "days": 14, "weeks": 2,
                          "extra_days": 0, "start_weekday": "Tuesday",
                          "end_weekday": "Tuesday"}  # fmt: skip
        backwards = await structured(almanac["almanac_days_between"],
                                     {"start": "2024-01-10", "end": "2024-01-01"})  # fmt: skip
        assert backwards["days"] == -9
        with pytest.raises(ToolException, match="start: 'next Tuesday' is not an ISO date"):
            await almanac["almanac_days_between"].ainvoke(
                {"start": "next Tuesday", "end": "2024-01-01"}
            )


@pytest.mark.parametrize(
    ("day", "phase"),
    [
        ("2024-04-08", "new moon"),  # the total solar eclipse over North America
        ("2024-04-23", "full moon"),
        ("2024-04-15", "first quarter"),
        ("2024-05-01", "last quarter"),
    ],
)
async def test_moon_phase_is_computed_for_known_dates(day, phase):
    async with almanac_tools() as almanac:
        answer = await structured(almanac["almanac_moon_phase"], {"date": day})
        assert answer["phase"] == phase
        assert 0 <= answer["illumination"] <= 1


def decode_png(data: bytes) -> tuple[int, int, bytes]:
    """Return width, height and the raw scanlines of an RGB PNG (one IDAT chunk)."""
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    chunks, at = {}, 8
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        (crc,) = struct.unpack(">I", data[at + 8 + length : at + 12 + length])
        assert zlib.crc32(kind + body) == crc
        chunks[kind] = body
        at += 12 + length
    width, height = struct.unpack(">II", chunks[b"IHDR"][:8])
    return width, height, zlib.decompress(chunks[b"IDAT"])


async def test_bar_chart_returns_a_legend_and_a_valid_png():
    async with almanac_tools() as almanac:
        blocks = await almanac["almanac_bar_chart"].ainvoke(
            {"title": "Rain", "labels": ["Jan", "Feb", "Mar"], "values": [3, 0, 6.5]}
        )
        text, image = blocks
        assert text["text"] == "Rain: Jan: 3, Feb: 0, Mar: 6.5"
        assert image["type"] == "image" and image["mime_type"] == "image/png"
        width, height, raw = decode_png(base64.b64decode(image["base64"]))
        assert (width, height) == (320, 200) and len(raw) == height * (1 + width * 3)
        assert len(set(raw)) > 2  # bars drawn, not a blank canvas


async def test_bar_chart_refuses_mismatched_or_negative_values():
    async with almanac_tools() as almanac:
        with pytest.raises(ToolException, match="same length"):
            await almanac["almanac_bar_chart"].ainvoke(
                {"title": "t", "labels": ["a"], "values": []}
            )
        with pytest.raises(ToolException, match="zero or more"):
            await almanac["almanac_bar_chart"].ainvoke(
                {"title": "t", "labels": ["a"], "values": [-1]}
            )
