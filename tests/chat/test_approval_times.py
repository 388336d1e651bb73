"""A held call's expiry in relative words, and the decision's controls in order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.template import Context, Template

from chat.templatetags.approval_tags import time_until, until_words

NOW = datetime(2026, 12, 3, 22, 40, tzinfo=UTC)


@pytest.mark.parametrize(
    ("seconds", "words"),
    [(-5, "now"), (0, "now"), (30, "in less than a minute"), (60, "in 1 min"),
     (4 * 60 + 59, "in 4 min"), (3600, "in 1 h"), (3600 + 5 * 60, "in 1 h 5 min")],
)  # fmt: skip
def test_an_expiry_is_said_as_the_time_left(seconds, words):
    assert until_words(seconds) == words


def test_the_expiry_keeps_its_exact_moment_in_the_time_element():
    html = time_until(NOW + timedelta(minutes=4), NOW)
    assert html == ('<time datetime="2026-12-03T22:44:00+00:00" data-until '
                    'title="Thu 3 Dec, 22:44 UTC">in 4 min</time>')  # fmt: skip


def test_approve_comes_before_deny_and_the_reason_sits_with_deny():
    html = Template('{% include "chat/_approval_form.html" %}').render(Context({
        "step": type("Step", (), {"pk": 7, "tool_name": "book"})(),
        "approval": type("Approval", (), {"expires_at": None})(),
        "words": {"arguments_rows": 3, "arguments_json": "{}"},
    }))  # fmt: skip
    order = [html.index(mark) for mark in
             ('name="arguments"', 'name="always"', 'value="approve"', 'name="reason"',
              'value="deny"')]  # fmt: skip
    assert order == sorted(order)
