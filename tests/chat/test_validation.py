"""What counts as a message, for the websocket and ``manage.py ask`` alike."""

from __future__ import annotations

import pytest

from chat.validation import MessageError, clean_message


@pytest.mark.parametrize(
    "content",
    [
        "",
        " \n\t ",
        "\u200b\u200c\u200d\u2060\ufeff",
        "\u202e\u202c",  # bidi controls
        "\u00ad",  # soft hyphen
        "\u3164\u115f\uffa0",  # Hangul fillers
        "\u2800\u2800",  # blank braille cells
        "\ufe0f\u0301",  # a variation selector and a combining mark alone
        "\U000e0041\U000e0042",  # tag characters
    ],
)
def test_a_message_with_nothing_visible_is_empty(content):
    with pytest.raises(MessageError, match="empty message"):
        clean_message(content, max_chars=100)


@pytest.mark.parametrize(
    ("content", "kept"),
    [("hi", "hi"), ("苏州", "苏州"), ("😀", "😀"), ("1+1", "1+1"), (" é ", " é"),
     ("\u202eevil.exe", "\u202eevil.exe"), ("\n \n  x\n   y \n\n", "  x\n   y")],
)  # fmt: skip
def test_a_message_with_something_visible_loses_its_blank_start_and_end_only(content, kept):
    assert clean_message(content, max_chars=100) == kept


def test_the_limit_counts_characters():
    assert clean_message("苏" * 10, max_chars=10) == "苏" * 10
    with pytest.raises(MessageError, match="11 characters long; the limit is 10"):
        clean_message("苏" * 11, max_chars=10)
