"""One Markdown policy for the server's render and the page's live render.

chat.markdown's nh3 call and static/js/markdown-live.js (through the page's
``#markdown-policy``) read the same lists; tests/browser/test_streaming.py compares the
two renders in Chromium.
"""

from __future__ import annotations

import json
import re

import pytest
from django.contrib.auth.models import User

from chat.markdown import ALLOWED_TAGS, markdown_policy, render_markdown
from chat.models import Conversation

pytestmark = pytest.mark.django_db


def test_the_chat_page_carries_the_servers_markdown_policy(client):
    user = User.objects.create_user("alice")
    conversation = Conversation.objects.create(owner=user)
    client.force_login(user)
    html = client.get(f"/c/{conversation.pk}/").content.decode()
    found = re.search(r'<script id="markdown-policy" type="application/json">(.*?)</script>', html)
    assert found, "the page has no markdown policy for its live render"
    assert json.loads(found.group(1)) == json.loads(json.dumps(markdown_policy()))
    # The libraries load before the script that uses them.
    order = [html.index(name) for name in ("markdown-it.umd.min.js", "purify.min.js",
                                           "js/markdown-live.js")]  # fmt: skip
    assert order == sorted(order)


def test_the_policy_is_the_list_the_server_sanitizes_with():
    policy = markdown_policy()
    assert set(policy["tags"]) == ALLOWED_TAGS
    assert policy["options"]["html"] is False
    # A tag or attribute the list leaves out is removed by the server's render too.
    assert "<img" not in render_markdown("![x](https://example.com/x.png)")
    assert 'rel="' + policy["link_rel"] + '"' in render_markdown("[a](https://example.com)")
    assert "style" not in render_markdown("| a |\n|---|\n| b |")
    assert 'style="text-align:right"' in render_markdown("| a |\n|--:|\n| b |")
