"""The audit admin for runs: list, filters, search, the run page, the staff conversation
view and the three CSV export entry points, with their permission checks."""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from chat.export import COLUMNS
from chat.models import AgentRun, AgentStep, Conversation, Message

pytestmark = pytest.mark.django_db

LIST = "/admin/chat/agentrun/"
EXPORT_MATCHING = "/admin/chat/agentrun/export/"
RUN_ID = COLUMNS.index("run_id")
ORDINAL = COLUMNS.index("step_ordinal")


def run_page(run: AgentRun) -> str:
    return f"/admin/chat/agentrun/{run.pk}/change/"


def run_export(run: AgentRun) -> str:
    return f"/admin/chat/agentrun/{run.pk}/export/"


def run_conversation(run: AgentRun) -> str:
    return f"/admin/chat/agentrun/{run.pk}/conversation/"


def make_run(
    conversation: Conversation,
    *,
    question: str = "Weather in Suzhou?",
    calls: list[tuple[str, str, dict | str, str, str]] = (),
    status: str = "succeeded",
    model_name: str = "demo-scripted",
    output: str = "It is **sunny**.",
    started_at=None,
) -> AgentRun:
    """Store a run: a model turn asking for ``calls`` (name, id, args, result, status),
    the tool steps, then the answer turn. Error counts are set as the recorder sets them."""
    now = started_at or timezone.now()
    # Linked to the question before it, as run_start links a question to its branch's leaf.
    before = conversation.messages.filter(role="user").order_by("-id").values_list("id").first()
    message = Message.objects.create(conversation=conversation, role="user", content=question,
                                     parent_id=before[0] if before else None)  # fmt: skip
    run = AgentRun.objects.create(
        conversation=conversation, user_message=message, strategy="tool_calling",
        provider="demo", model_name=model_name, status=status, started_at=now,
        finished_at=now + timedelta(seconds=2), duration_ms=2000, iterations=2, output=output,
        tool_call_count=len(calls), tool_error_count=sum(c[4] == "error" for c in calls),
        input_tokens=100, output_tokens=20, total_tokens=120,
    )  # fmt: skip
    AgentStep.objects.create(
        run=run, ordinal=1, iteration=1, kind="model_turn", status="success", started_at=now,
        text="Let me check.", raw={"tool_calls": [{"name": c[0], "id": c[1]} for c in calls]},
        input_tokens=60, output_tokens=10, total_tokens=70,
    )  # fmt: skip
    for ordinal, (name, call_id, arguments, result, step_status) in enumerate(calls, start=2):
        AgentStep.objects.create(
            run=run, ordinal=ordinal, iteration=1, kind="tool_call", status=step_status,
            started_at=now, tool_name=name, tool_call_id=call_id, arguments=arguments,
            result=result, duration_ms=15,
        )  # fmt: skip
    AgentStep.objects.create(
        run=run, ordinal=len(calls) + 2, iteration=2, kind="model_turn", status="success",
        started_at=now, text=output, raw={"tool_calls": []},
        input_tokens=40, output_tokens=10, total_tokens=50,
    )  # fmt: skip
    return run


def weather_call(call_id: str = "call_w1", town: str = "Suzhou") -> tuple:
    return ("weather_forecast", call_id, {"town": town, "days": 1}, '{"high_c": 8}', "success")


def staff_user(username: str = "auditor", *perms: str) -> User:
    user = User.objects.create_user(username, is_staff=True)
    codenames = perms or ("view_agentrun", "view_conversation")
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return user


@pytest.fixture
def alice() -> User:
    return User.objects.create_user("alice")


@pytest.fixture
def auditor(client) -> User:
    user = staff_user()
    client.force_login(user)
    return user


def csv_rows(response) -> list[list[str]]:
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment;" in response["Content-Disposition"]
    body = b"".join(response.streaming_content).decode("utf-8-sig")
    header, *rows = csv.reader(io.StringIO(body, newline=""))
    assert tuple(header) == COLUMNS
    return rows


def listed(response) -> list[AgentRun]:
    assert response.status_code == 200
    return list(response.context["cl"].result_list)


# The list


def test_the_list_shows_who_asked_what_and_how_the_run_went(client, auditor, alice):
    conversation = Conversation.objects.create(owner=alice, title="Trip to Suzhou")
    failing = ("weather_forecast", "call_x", {"town": "?"}, "Error: unknown town", "error")
    make_run(conversation, question="Weather in Suzhou and a B&B?",
             calls=[weather_call(), failing])  # fmt: skip
    make_run(Conversation.objects.create(guest_key="k"), question="Guest question")

    html = client.get(LIST).content.decode()
    assert "alice" in html
    assert "(guest)" in html
    assert f'href="/admin/chat/conversation/{conversation.pk}/change/"' in html
    assert "Trip to Suzhou" in html
    assert "Weather in Suzhou and a B&amp;B?" in html
    assert "demo-scripted" in html
    assert "Native tool calling" in html and "Succeeded" in html
    assert '<td class="field-tool_calls">2</td>' in html
    assert '<strong class="trace-errors">1</strong>' in html
    assert '<td class="field-run_duration">2.0 s</td>' in html
    assert '<td class="field-tokens">≈120</td>' in html  # the demo estimates its tokens


def test_the_list_marks_the_tool_calls_of_a_run_not_ended_as_not_counted_yet(
    client, auditor, alice
):
    """A run's counts are stored at its end: a run going or waiting for approval read
    "0 tool calls" in the list while its calls ran (walkthrough)."""
    run = make_run(Conversation.objects.create(owner=alice), calls=[weather_call()],
                   status="waiting")  # fmt: skip
    AgentRun.objects.filter(pk=run.pk).update(finished_at=None, tool_call_count=0)

    html = client.get(LIST).content.decode()
    assert '<td class="field-tool_calls"><span title="counted when the run ends' in html


def test_the_list_makes_the_same_number_of_queries_for_5_and_50_runs(client, auditor, alice):
    def list_queries() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert client.get(LIST).status_code == 200
        return len(queries)

    conversations = [
        Conversation.objects.create(owner=alice),
        Conversation.objects.create(guest_key="k"),
    ]
    for i in range(5):
        make_run(conversations[i % 2], calls=[weather_call(f"call_{i}")])
    client.get(LIST)  # warm per-process caches (content types)
    with_5 = list_queries()
    for i in range(5, 50):
        make_run(conversations[i % 2], calls=[weather_call(f"call_{i}")])
    with_50 = list_queries()
    assert len(listed(client.get(LIST))) == 50
    assert with_50 == with_5


def test_the_tool_name_filter_offers_each_tool_and_lists_a_run_once(client, auditor, alice):
    conversation = Conversation.objects.create(owner=alice)
    twice = make_run(conversation, calls=[weather_call("call_a"), weather_call("call_b")])
    calc_call = ("calculator", "call_c", {"expression": "1"}, "1", "success")
    calc = make_run(conversation, calls=[calc_call])
    make_run(conversation, calls=[])

    response = client.get(LIST)
    assert "?tool=weather_forecast" in response.content.decode()
    assert "?tool=calculator" in response.content.decode()
    assert listed(client.get(LIST, {"tool": "weather_forecast"})) == [twice]
    assert listed(client.get(LIST, {"tool": "calculator"})) == [calc]
    assert response.context["cl"].result_count == 3


def test_the_has_tool_errors_filter_splits_runs_on_their_error_count(client, auditor, alice):
    conversation = Conversation.objects.create(owner=alice)
    failing = ("weather_forecast", "call_x", {"town": "?"}, "Error: unknown town", "error")
    with_error = make_run(conversation, calls=[weather_call(), failing])
    clean = make_run(conversation, calls=[weather_call("call_y")])

    assert listed(client.get(LIST, {"has_tool_errors": "yes"})) == [with_error]
    assert listed(client.get(LIST, {"has_tool_errors": "no"})) == [clean]


def test_status_model_and_date_filters_narrow_the_list(client, auditor, alice):
    conversation = Conversation.objects.create(owner=alice)
    old = make_run(conversation, status="failed", model_name="gpt-4o-mini",
                   started_at=timezone.now() - timedelta(days=400))  # fmt: skip
    new = make_run(conversation)

    assert listed(client.get(LIST, {"status__exact": "failed"})) == [old]
    assert listed(client.get(LIST, {"model_name": "gpt-4o-mini"})) == [old]
    year = timezone.localtime(new.started_at).year
    assert listed(client.get(LIST, {"started_at__year": year})) == [new]


@pytest.mark.parametrize("term", ["needle-arg", "needle-result", "call_needle", "苏州"])
def test_search_finds_runs_by_step_arguments_results_and_call_ids_once(
    client, auditor, alice, term
):
    conversation = Conversation.objects.create(owner=alice)
    hit = make_run(conversation, calls=[
        ("weather_forecast", "call_needle_1", {"town": "苏州", "q": "needle-arg"},
         '{"note": "needle-result"}', "success"),
        ("weather_forecast", "call_needle_2", {"town": "苏州", "q": "needle-arg"},
         '{"note": "needle-result"}', "success"),
    ])  # fmt: skip
    make_run(conversation, calls=[weather_call("call_other", town="Hangzhou")])

    response = client.get(LIST, {"q": term})
    assert listed(response) == [hit]
    assert response.context["cl"].result_count == 1


def test_search_covers_the_question_the_answer_and_tool_names(client, auditor, alice):
    conversation = Conversation.objects.create(owner=alice)
    run = make_run(
        conversation,
        question="Pandas in Chengdu?",
        output="See the **base**.",
        calls=[("search_travel_info", "call_1", {"query": "pandas"}, "[]", "success")],
    )
    make_run(conversation, question="Other", output="Other", calls=[weather_call()])

    for term in ("Chengdu", "base", "search_travel_info"):
        assert listed(client.get(LIST, {"q": term})) == [run], term


# The run page and the conversation as the user saw it


def test_the_run_page_shows_steps_in_order_with_pretty_json_and_the_answer(client, auditor, alice):
    conversation = Conversation.objects.create(owner=alice)
    run = make_run(
        conversation,
        question="What about \u202eexe.txt?",
        output="It is **sunny**. <script>alert(1)</script>",
        calls=[
            (
                "weather_forecast",
                "call_first",
                {"town": "苏州"},
                '{"days": [{"high_c": 8}]}',
                "success",
            ),
            ("calculator", "call_second", {"expression": "1/0"}, "Error: division", "error"),
        ],
    )
    response = client.get(run_page(run))
    html = response.content.decode()
    assert response.status_code == 200
    assert html.index("call_first") < html.index("call_second")
    assert "{\n  &quot;town&quot;: &quot;苏州&quot;\n}" in html  # pretty, Chinese kept
    assert "&quot;days&quot;: [\n    {\n      &quot;high_c&quot;: 8" in html  # result, pretty
    assert "<strong>sunny</strong>" in html  # the answer as Markdown
    assert "<script>alert(1)</script>" not in html
    assert '<span class="ctl">&lt;U+202E&gt;</span>exe.txt' in html
    asked = r"Asked for\s*<code>weather_forecast</code>,\s*<code>calculator</code>"
    assert re.search(asked, html)
    assert "15 ms" in html and "60 in · 10 out · 70 tokens" in html
    assert f'href="{run_conversation(run)}#run-{run.pk}"' in html
    assert f'href="{run_export(run)}"' in html
    assert 'name="_save"' not in html  # read-only


def test_staff_see_the_conversation_as_the_user_saw_it_without_composer_or_socket(
    client, auditor, alice
):
    conversation = Conversation.objects.create(owner=alice, title="Suzhou trip")
    first = make_run(conversation, question="First question")
    make_run(conversation, question="Second question", calls=[weather_call()])

    response = client.get(run_conversation(first))
    html = response.content.decode()
    assert response.status_code == 200
    assert response.templates[0].name == "chat/page.html"
    assert html.index("First question") < html.index("Second question")
    assert 'data-tool="weather_forecast"' in html
    assert "<strong>sunny</strong>" in html
    assert "ws-connect" not in html and 'id="composer"' not in html
    assert "as alice saw it" in html
    # The user's own page stays theirs alone.
    assert client.get(f"/c/{conversation.pk}/").status_code == 404


def test_the_conversation_admin_still_lists_and_shows_conversations(client, auditor, alice):
    conversation = Conversation.objects.create(owner=alice, title="Suzhou trip")
    make_run(conversation)
    assert "Suzhou trip" in client.get("/admin/chat/conversation/").content.decode()
    page = client.get(f"/admin/chat/conversation/{conversation.pk}/change/")
    assert page.status_code == 200
    assert "Weather in Suzhou?" in page.content.decode()


# CSV exports


def test_the_export_action_writes_the_selected_runs_only(client, auditor, alice):
    conversation = Conversation.objects.create(owner=alice)
    chosen = make_run(conversation, calls=[weather_call()])
    make_run(conversation, calls=[weather_call("call_2")])

    response = client.post(LIST, {"action": "export_selected", "_selected_action": [chosen.pk]})
    rows = csv_rows(response)
    assert {row[RUN_ID] for row in rows} == {str(chosen.pk)}
    assert [row[ORDINAL] for row in rows] == ["1", "2", "3"]


def test_the_bom_action_starts_with_a_byte_order_mark(client, auditor, alice):
    run = make_run(Conversation.objects.create(owner=alice), question="苏州天气?")
    response = client.post(LIST, {"action": "export_selected_bom", "_selected_action": [run.pk]})
    body = b"".join(response.streaming_content)
    assert body.startswith(b"\xef\xbb\xbf")
    assert "苏州天气?" in body.decode("utf-8-sig")


def test_export_all_matching_follows_the_lists_filters_and_search(client, auditor, alice):
    conversation = Conversation.objects.create(owner=alice)
    failing = ("weather_forecast", "call_x", {"town": "?"}, "Error: unknown town", "error")
    wanted = make_run(conversation, calls=[weather_call("call_hit_1"), failing])
    make_run(conversation, calls=[weather_call("call_hit_2")])  # no error
    make_run(conversation, calls=[])  # no match

    listing = client.get(LIST, {"q": "call_hit", "has_tool_errors": "yes", "p": "1"})
    link = f'href="{EXPORT_MATCHING}?q=call_hit&amp;has_tool_errors=yes"'  # no page number
    assert link in listing.content.decode()

    rows = csv_rows(client.get(EXPORT_MATCHING, {"q": "call_hit", "has_tool_errors": "yes"}))
    assert {row[RUN_ID] for row in rows} == {str(wanted.pk)}
    assert len(rows) == 4  # one row per step, no duplicates from the search join
    everything = csv_rows(client.get(EXPORT_MATCHING))
    assert len({row[RUN_ID] for row in everything}) == 3


def test_export_all_matching_with_bom_and_a_bad_filter(client, auditor, alice):
    make_run(Conversation.objects.create(owner=alice))
    response = client.get(EXPORT_MATCHING, {"bom": "1", "status__exact": "succeeded"})
    body = b"".join(response.streaming_content)
    assert body.startswith(b"\xef\xbb\xbf")
    assert len(body.decode("utf-8-sig").splitlines()) == 1 + 2
    assert client.get(EXPORT_MATCHING, {"no_such_field": "1"}).status_code == 400


def test_the_run_page_download_exports_that_run(client, auditor, alice):
    conversation = Conversation.objects.create(owner=alice)
    run = make_run(conversation, calls=[weather_call()])
    make_run(conversation)

    rows = csv_rows(client.get(run_export(run)))
    assert {row[RUN_ID] for row in rows} == {str(run.pk)}
    assert len(rows) == 3
    assert b"".join(client.get(run_export(run), {"bom": "1"}).streaming_content).startswith(
        b"\xef\xbb\xbf"
    )
    assert client.get("/admin/chat/agentrun/999999/export/").status_code == 404


# Who may do what


def test_non_staff_are_sent_to_the_admin_login(client, alice):
    run = make_run(Conversation.objects.create(owner=alice))
    client.force_login(alice)
    for url in (LIST, run_page(run), EXPORT_MATCHING, run_export(run), run_conversation(run)):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response.url.startswith("/admin/login/"), url


def test_staff_without_the_run_permission_are_refused_everything(client, alice):
    run = make_run(Conversation.objects.create(owner=alice))
    client.force_login(staff_user("clerk", "view_conversation"))
    for url in (LIST, run_page(run), EXPORT_MATCHING, run_export(run), run_conversation(run)):
        assert client.get(url).status_code == 403, url
    response = client.post(LIST, {"action": "export_selected", "_selected_action": [run.pk]})
    assert response.status_code == 403


def test_staff_who_may_only_change_runs_see_the_list_but_cannot_export(client, alice):
    # Django lets "change" permission view the list; exporting needs "view" (can_export).
    run = make_run(Conversation.objects.create(owner=alice))
    client.force_login(staff_user("editor", "change_agentrun"))
    response = client.get(LIST)
    html = response.content.decode()
    assert response.status_code == 200
    assert "export_selected" not in html and EXPORT_MATCHING not in html
    assert client.get(EXPORT_MATCHING).status_code == 403
    assert client.get(run_export(run)).status_code == 403
    posted = client.post(LIST, {"action": "export_selected", "_selected_action": [run.pk]})
    assert not posted.get("Content-Type", "").startswith("text/csv")
    assert f'href="{run_export(run)}"' not in client.get(run_page(run)).content.decode()


def test_only_superusers_are_offered_deleting_runs(client, auditor, alice):
    make_run(Conversation.objects.create(owner=alice))
    assert "delete_selected" not in client.get(LIST).content.decode()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    assert "delete_selected" in client.get(LIST).content.decode()


# Issue 11: the tool filter, one word per concept, file names, clipped results, the 404 page


def test_the_tool_name_filter_lists_registered_tools_and_other_not_invented_names(
    client, auditor, alice
):
    from chat.catalog import code_tools_for

    conversation = Conversation.objects.create(owner=alice)
    registered = make_run(conversation, calls=[weather_call()])
    invented = make_run(
        conversation, calls=[("book_flight_now", "call_f", {}, "Error: unknown tool", "error")]
    )
    unparsed = make_run(conversation, calls=[("", "call_p", "{not json", "", "error")])

    html = client.get(LIST).content.decode()
    for tool in code_tools_for():
        assert f"?tool={tool.name}" in html
    assert "?tool=other" in html
    assert "?tool=book_flight_now" not in html
    assert listed(client.get(LIST, {"tool": "other"})) == [unparsed, invented]
    assert listed(client.get(LIST, {"tool": "weather_forecast"})) == [registered]
    # A link made before the filter changed still finds exactly that name.
    assert listed(client.get(LIST, {"tool": "book_flight_now"})) == [invented]


def test_the_other_tool_filter_lists_a_run_once_whatever_its_unregistered_calls(
    client, auditor, alice
):
    conversation = Conversation.objects.create(owner=alice)
    both = make_run(conversation, calls=[
        ("made_up_a", "call_1", {}, "Error: unknown tool", "error"),
        ("made_up_b", "call_2", {}, "Error: unknown tool", "error"),
        weather_call("call_3"),
    ])  # fmt: skip
    response = client.get(LIST, {"tool": "other"})
    assert listed(response) == [both]
    assert response.context["cl"].result_count == 1


def test_the_list_and_the_run_page_say_model_turns_never_iterations(client, auditor, alice):
    run = make_run(Conversation.objects.create(owner=alice), status="max_iterations")
    for url in (LIST, run_page(run)):
        html = client.get(url).content.decode()
        assert "odel turn" in html, url
        assert "teration" not in html.lower().replace("max_iterations", ""), url
    assert "Model turn limit reached" in client.get(LIST).content.decode()
    assert '<td class="field-model_turns">2</td>' in client.get(LIST).content.decode()


def test_plain_and_excel_exports_have_distinct_file_names(client, auditor, alice):
    run = make_run(Conversation.objects.create(owner=alice))
    plain = re.compile(r'attachment; filename="agent-runs?(-\d+)?-\d{8}T\d{6}Z\.csv"')
    excel = re.compile(r'attachment; filename="agent-runs?(-\d+)?-\d{8}T\d{6}Z-excel\.csv"')
    selected = {"_selected_action": [run.pk]}
    responses = {
        "action": client.post(LIST, {"action": "export_selected", **selected}),
        "action bom": client.post(LIST, {"action": "export_selected_bom", **selected}),
        "matching": client.get(EXPORT_MATCHING),
        "matching bom": client.get(EXPORT_MATCHING, {"bom": "1"}),
        "run": client.get(run_export(run)),
        "run bom": client.get(run_export(run), {"bom": "1"}),
    }
    for name, response in responses.items():
        pattern = excel if name.endswith("bom") else plain
        assert pattern.fullmatch(response["Content-Disposition"]), name
    assert f"agent-run-{run.pk}-" in responses["run"]["Content-Disposition"]


def sent(run: AgentRun, call_id: str, observation: str) -> None:
    """Store what the model was sent for a call of ``run``, as the recorder does."""
    AgentStep.objects.filter(run=run, tool_call_id=call_id).update(observation=observation)


def test_a_result_longer_than_the_model_saw_says_what_the_model_was_sent(client, auditor, alice):
    from agents.tool_calls import clip

    long_call = ("weather_forecast", "call_long", {"town": "Suzhou"}, "x" * 250, "success")
    run = make_run(Conversation.objects.create(owner=alice), calls=[long_call])
    sent(run, "call_long", clip("x" * 250, 100))
    html = client.get(run_page(run)).content.decode()
    assert "Result (ToolMessage): the model was sent the first 100 of 250 characters" in html
    assert "x" * 250 in html  # the admin holds it whole
    csv_result = csv_rows(client.get(run_export(run)))[1][COLUMNS.index("result")]
    assert csv_result == "x" * 250


def test_a_result_clipped_before_storage_says_how_much_the_tool_returned(client, auditor, alice):
    from agents.tool_calls import clip

    stored = clip("z" * 5_000, 1_000)
    call = ("weather_forecast", "call_huge", {"town": "Suzhou"}, stored, "success")
    run = make_run(Conversation.objects.create(owner=alice), calls=[call])
    sent(run, "call_huge", clip("z" * 5_000, 100))
    html = client.get(run_page(run)).content.decode()
    assert (
        "Result (ToolMessage): the tool returned 5,000 characters, the first 1,000 are stored "
        "and the model was sent the first 100"
    ) in html


def test_what_the_model_was_sent_is_shown_beside_a_result_it_differs_from(client, auditor, alice):
    from agents.tool_calls import clip

    long_call = ("weather_forecast", "call_long", {"town": "Suzhou"}, "x" * 250, "success")
    run = make_run(Conversation.objects.create(owner=alice), calls=[long_call, weather_call()])
    sent(run, "call_long", clip("x" * 250, 100))
    sent(run, "call_w1", '{"high_c": 8}')
    html = client.get(run_page(run)).content.decode()
    assert html.count("data-observation") == 1  # the short result was sent as it is
    assert "What the model was sent (the ToolMessage), as it differs" in html
    assert "[clipped: showing the first 100 of 250 characters]" in html
    rows = csv_rows(client.get(run_export(run)))
    observations = [row[COLUMNS.index("observation")] for row in rows]
    assert observations == ["", clip("x" * 250, 100), '{"high_c": 8}', ""]


def test_a_step_stored_before_observations_were_kept_says_so_and_claims_nothing(
    client, auditor, alice, settings
):
    settings.AGENT_MAX_OBSERVATION_CHARS = 100  # today's setting is no fact about the run
    long_call = ("weather_forecast", "call_long", {"town": "Suzhou"}, "x" * 250, "success")
    run = make_run(Conversation.objects.create(owner=alice), calls=[long_call])
    html = client.get(run_page(run)).content.decode()
    assert "What the model was sent is not recorded" in html
    assert '<div class="trace-label">Result (ToolMessage)</div>' in html
    assert "the model was sent the first" not in html
    assert csv_rows(client.get(run_export(run)))[1][COLUMNS.index("observation")] == ""


def test_a_short_result_has_a_plain_heading(client, auditor, alice):
    run = make_run(Conversation.objects.create(owner=alice), calls=[weather_call()])
    html = client.get(run_page(run)).content.decode()
    assert '<div class="trace-label">Result (ToolMessage)</div>' in html


def test_the_404_page_has_the_favicon_and_a_way_back(client):
    response = client.get("/no-such-page/<b>")
    html = response.content.decode()
    assert response.status_code == 404
    assert 'rel="icon"' in html and "favicon.svg" in html
    assert 'href="/"' in html and "Back to the chat" in html
    assert "<b>" not in html  # the path is escaped
