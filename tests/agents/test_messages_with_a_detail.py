"""A message made of our sentence and a detail from elsewhere (a server's words, a
schema's, an exception's) has one full stop where they meet, not two."""

from __future__ import annotations

import pytest
from langchain_core.tools import StructuredTool
from pydantic import BaseModel, field_validator

from agents.model_errors import describe_model_error
from agents.sentences import clause
from agents.tool_calls import _call_tool
from tests.agents.test_provider_errors import StatusError


def test_a_failed_run_with_the_servers_own_full_stop_reads_with_one():
    text = describe_model_error(StatusError(500, "The fake provider had an internal error."))

    assert "had an internal error. An administrator" in text
    assert ".." not in text


class Booking(BaseModel):
    nights: int

    @field_validator("nights")
    @classmethod
    def positive(cls, value: int) -> int:
        if value < 1:
            raise ValueError("A stay is one night or more.")
        return value


async def test_arguments_a_validator_refuses_with_a_full_stop_read_with_one():
    tool = StructuredTool.from_function(lambda nights: "ok", name="book", description="Book.",
                                        args_schema=Booking)  # fmt: skip
    call = {"name": "book", "args": {"nights": 0}, "id": "call-1"}

    outcome = await _call_tool(tool, call, names=["book"], timeout_s=5)

    assert "one night or more. Fix the arguments" in outcome.result
    assert ".." not in outcome.result


@pytest.mark.parametrize(
    ("detail", "expected"),
    [
        ("had an internal error.", "had an internal error"),
        ("服务器内部错误。", "服务器内部错误"),
        ("wait... ", "wait"),
        ("no stop", "no stop"),
        ("Perhaps you forgot a comma?", "Perhaps you forgot a comma?"),
    ],
)  # fmt: skip
def test_a_clause_loses_its_full_stop_only(detail, expected):
    assert clause(detail) == expected
