"""What a user reads when a model call fails (agents/model_errors.py), for the failures
real servers produce; the same errors come through HTTP in test_openai_compatible.py."""

from __future__ import annotations

import pytest

from agents.model_errors import (
    DROPPED,
    EMPTY_REPLY,
    OTHER,
    STREAM_ERROR,
    UNREACHABLE,
    EmptyReply,
    IncompleteReply,
    describe_model_error,
)


class StatusError(Exception):
    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.body = {"error": {"message": message}}


class RemoteProtocolError(Exception):
    """Named as httpx names it."""


class APIConnectionError(Exception):
    """Named as the OpenAI SDK names it."""


def test_a_500_says_the_server_could_not_handle_this_request_with_its_words():
    text = describe_model_error(StatusError(500, "Value is not callable: null"))
    assert "could not handle this request (HTTP 500)" in text
    assert "Value is not callable: null" in text
    assert "Try again later" not in text


@pytest.mark.parametrize("status", [502, 503, 504])
def test_a_gateway_or_overload_error_is_a_passing_outage(status):
    assert describe_model_error(StatusError(status, "busy")).endswith("Try again later.")


def test_an_empty_stream_says_the_server_sent_no_reply_and_why_that_happens():
    assert describe_model_error(EmptyReply("no chunks")) == EMPTY_REPLY
    # Another model's stream, as langchain-core reports it.
    assert describe_model_error(ValueError("No generation chunks were returned")) == EMPTY_REPLY
    assert "no reply" in EMPTY_REPLY and "context" in EMPTY_REPLY
    assert describe_model_error(ValueError("other")) == OTHER.format(kind="ValueError")


def test_a_connection_broken_off_mid_reply_says_so_through_the_sdks_wrapping():
    try:
        try:
            raise RemoteProtocolError("peer closed connection")
        except RemoteProtocolError as exc:
            raise APIConnectionError("Connection error.") from exc
    except APIConnectionError as wrapped:
        assert describe_model_error(wrapped) == DROPPED
    assert describe_model_error(IncompleteReply("no finish_reason")) == DROPPED
    assert describe_model_error(APIConnectionError("refused")) == UNREACHABLE


class APIError(Exception):
    """Named as the OpenAI SDK names an error event inside a stream."""

    def __init__(self, message: str, body: dict) -> None:
        super().__init__(message)
        self.body = body


def test_an_error_event_inside_a_stream_gives_the_servers_words():
    exc = APIError("x", {"code": 400, "message": "the request exceeds the available context"})
    assert describe_model_error(exc) == STREAM_ERROR.format(
        detail="the request exceeds the available context"
    )
