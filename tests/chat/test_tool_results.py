"""What a tool returned besides text, from the loop to the rows, the card, the admin, the
CSV and the next question's history: images shown, never base64 in anything the model
or a reader of text gets."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import Permission, User
from django.template.loader import render_to_string
from django.utils import timezone
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import StructuredTool, tool

from agents.tool_output import IMAGE_NOTE
from chat import fragments, store
from chat.export import COLUMNS, csv_lines, trace_rows
from chat.models import AgentRun, AgentStep, Conversation, StepKind, StepStatus
from chat.recorder import Update
from chat.runs import create_run, execute_run
from tests.fakes import ScriptedChatModel, tool_call
from tests.images import png_base64, png_bytes

PNG = png_base64()  # over 8,000 characters
assert len(PNG) > 8_000
CHART = [
    {"type": "text", "text": "Rainfall in Suzhou <by month>:"},
    {"type": "image", "base64": PNG, "mime_type": "image/png"},
]


def chart(town: str) -> list:
    return CHART


@tool(response_format="content_and_artifact")
def rooms(town: str) -> tuple[str, dict]:
    """Find rooms."""
    return "2 rooms free.", {"listings": [{"id": "sz-1", "name": "<b>Inn</b>"}]}


TOOLS = [StructuredTool.from_function(chart, name="chart", description="Chart."), rooms]


class TextOf(HTMLParser):
    """The text a person reads of some HTML (no attributes, no tags)."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)

    @classmethod
    def of(cls, html: str) -> str:
        parser = cls()
        parser.feed(html)
        return "".join(parser.parts)


def card_text(html: str, step_id: int) -> list[str]:
    """Return the words of step ``step_id``'s card in ``html`` (up to the next element
    with a ``data-kind``: the next step), and its image sources."""
    start = html.rfind("<", 0, html.index(f'id="step-{step_id}"'))
    end = html.find("data-kind=", start + 40)
    card = html[start : html.rfind("<", 0, end) if end != -1 else len(html)]
    return TextOf.of(card).split() + re.findall(r'src="([^"]*)"', card)


async def ask(conversation: Conversation, content: str, model, updates=None) -> AgentRun:
    row = await database_sync_to_async(create_run)(conversation_id=conversation.pk,
                                                   content=content)  # fmt: skip

    async def listen(update: Update) -> None:
        if updates is not None:
            updates.append(update)

    return await execute_run(row.pk, model=model, tools=TOOLS, listeners=[listen])


def calls_then_answer() -> list:
    return [
        AIMessage("", tool_calls=[tool_call("chart", {"town": "Suzhou"}, "c1"),
                                  tool_call("rooms", {"town": "Suzhou"}, "c2")]),
        AIMessage("Wet summers; two rooms."),
    ]  # fmt: skip


@pytest.mark.django_db(transaction=True)
async def test_blocks_and_artifact_are_stored_shown_live_and_kept_out_of_text_and_history():
    conversation = await database_sync_to_async(Conversation.objects.create)()
    model = ScriptedChatModel(script=calls_then_answer())
    updates: list[Update] = []
    await ask(conversation, "Rain and rooms in Suzhou?", model, updates)

    steps = await database_sync_to_async(
        lambda: {s.tool_name: s for s in AgentStep.objects.filter(kind=StepKind.TOOL_CALL)}
    )()
    note = IMAGE_NOTE.format(what=f"image/png, {len(png_bytes()):,} bytes")
    assert steps["chart"].result == f"Rainfall in Suzhou <by month>:\n{note}"
    assert steps["chart"].result_blocks == CHART and steps["chart"].artifact is None
    assert steps["rooms"].result == "2 rooms free." and steps["rooms"].result_blocks is None
    assert steps["rooms"].artifact == {"listings": [{"id": "sz-1", "name": "<b>Inn</b>"}]}

    # The model read the notes, never the data.
    sent = [m for m in model.prompts[1] if isinstance(m, ToolMessage)]
    assert [m.content for m in sent] == [steps["chart"].result, "2 rooms free."]
    # The live card draws the image; no text a person reads holds the data.
    live = "".join(u.html for u in updates)
    assert f'src="data:image/png;base64,{PNG}"' in live
    assert PNG not in TextOf.of(live) and PNG[:40] not in TextOf.of(live)
    assert "&lt;b&gt;Inn&lt;/b&gt;" in live and "<b>Inn</b>" not in live

    # The next question's history sends the stored text, notes and all.
    follow_up = ScriptedChatModel(script=[AIMessage("The chart showed rain.")])
    await ask(conversation, "And the chart?", follow_up)
    history = [m for m in follow_up.prompts[0] if isinstance(m, ToolMessage)]
    assert [m.content for m in history] == [steps["chart"].result, "2 rooms free."]
    assert all(PNG[:40] not in str(m.content) for m in follow_up.prompts[0])

    # The CSV keeps the text in `result` and the artifact at the end.
    csv = await database_sync_to_async(
        lambda: "".join(csv_lines(trace_rows(AgentRun.objects.all())))
    )()
    assert PNG[:40] not in csv and note in csv
    rows = await database_sync_to_async(lambda: list(trace_rows(AgentRun.objects.all())))()
    by_tool = {row[COLUMNS.index("tool_name")]: row for row in rows}
    artifact = COLUMNS.index("artifact")
    assert by_tool["rooms"][artifact] == '{"listings": [{"id": "sz-1", "name": "<b>Inn</b>"}]}'
    assert by_tool["chart"][artifact] == ""


@pytest.mark.django_db(transaction=True)
async def test_the_reloaded_page_shows_the_same_card_as_the_live_one():
    conversation = await database_sync_to_async(Conversation.objects.create)()
    updates: list[Update] = []
    run = await ask(conversation, "Rain?", ScriptedChatModel(script=calls_then_answer()), updates)

    @database_sync_to_async
    def reloaded() -> str:
        (loaded,) = store.conversation_runs(conversation_id=conversation.pk)
        return render_to_string("chat/_run.html", {"run": loaded, "steps": loaded.steps.all()})

    page = await reloaded()
    step_ids = await database_sync_to_async(
        lambda: list(run.steps.filter(kind=StepKind.TOOL_CALL).values_list("pk", flat=True))
    )()
    for step_id in step_ids:
        live = [u.html for u in updates if f'id="step-{step_id}"' in u.html][-1]
        assert card_text(live, step_id) == card_text(page, step_id)
    assert page.count("data-tool-image") == 1 and page.count("data-artifact") == 1


def stored_call(result_blocks=None, artifact=None, *, result="see the chart") -> AgentStep:
    conversation = Conversation.objects.create()
    run = store.run_start(conversation_id=conversation.pk, content="q", provider="demo",
                          model_name="demo-scripted", started_at=timezone.now())  # fmt: skip
    now = timezone.now()
    step = store.step_start(run_id=run.pk, kind=StepKind.TOOL_CALL, iteration=1, started_at=now,
                            tool_name="chart", tool_call_id="c1",
                            arguments={"town": "x"})  # fmt: skip
    return store.step_finish(step_id=step.pk, finished_at=now, status=StepStatus.SUCCESS,
                             result=result, result_blocks=result_blocks,
                             artifact=artifact)  # fmt: skip


SVG = "PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciIG9ubG9hZD0iYWxlcnQoMSkiLz4="


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("block", "shown"),
    [
        ({"type": "image", "base64": SVG, "mime_type": "image/svg+xml"}, "[image: image/svg+xml"),
        ({"type": "image", "base64": SVG, "mime_type": "image/png"}, "[image: image/png"),
        ({"type": "image", "base64": "not base64!", "mime_type": "image/png"}, "[image: image/png"),
        ({"type": "image_url", "image_url": {"url": f"data:image/svg+xml;base64,{SVG}"}},
         "[image: image/svg+xml"),
    ],
    ids=["svg", "svg-declared-png", "broken-base64", "svg-data-url"],
)  # fmt: skip
def test_an_image_that_is_not_png_jpeg_gif_or_webp_is_a_note_never_drawn(block, shown):
    html = fragments.step_replaced(stored_call([block]))
    assert "<img" not in html and shown in html


@pytest.mark.django_db
def test_a_remote_image_is_a_link_that_is_never_loaded_and_script_urls_are_not_links():
    blocks = [
        {"type": "image", "url": 'https://tracker.example/pixel.png?who=me&x="1"'},
        {"type": "image_url", "image_url": {"url": "javascript:alert(1)"}},
    ]
    html = fragments.step_replaced(stored_call(blocks))
    assert "<img" not in html
    assert 'href="https://tracker.example/pixel.png?who=me&amp;x=&quot;1&quot;"' in html
    assert 'rel="noopener noreferrer nofollow"' in html
    assert 'href="javascript' not in html and "[image: javascript:alert(1)]" in html


@pytest.mark.django_db
def test_the_admins_run_page_shows_the_image_and_the_whole_artifact(client):
    step = stored_call(CHART, {"rows": list(range(3))})
    user = User.objects.create_user("auditor", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=("view_agentrun",)))
    client.force_login(user)

    html = client.get(f"/admin/chat/agentrun/{step.run_id}/change/").content.decode()
    assert f'src="data:image/png;base64,{PNG}"' in html and "data-artifact" in html
    assert PNG[:40] not in TextOf.of(html)
