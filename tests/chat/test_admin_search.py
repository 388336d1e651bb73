"""The run list's search (chat.admin_search): the runs Django's own icontains search found,
on SQLite and PostgreSQL, and on PostgreSQL through an index instead of every row."""

from __future__ import annotations

from importlib import import_module

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import RequestFactory

from chat.admin import AgentRunAdmin
from chat.admin_search import SEARCH_HELP, runs_matching
from chat.models import AgentRun, Conversation
from tests.chat.test_admin import make_run

pytestmark = pytest.mark.django_db

LIST = "/admin/chat/agentrun/"
on_postgresql = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="pg_trgm and EXPLAIN's plans are PostgreSQL's"
)


class IContainsRunAdmin(AgentRunAdmin):
    """The run admin with Django's own search over the same ``search_fields``: what the
    search found before chat.admin_search (bench/search.py's peer too)."""

    def get_search_results(self, request, queryset, search_term):
        return admin.ModelAdmin.get_search_results(self, request, queryset, search_term)


@pytest.fixture
def superuser(client) -> User:
    user = User.objects.create_superuser("root")
    client.force_login(user)
    return user


@pytest.fixture
def runs() -> list[AgentRun]:
    """Runs whose texts, tools and ids differ: each search below finds some, not all."""
    owner = User.objects.create_user("alice")
    conversation = Conversation.objects.create(owner=owner)
    return [
        make_run(conversation, question="Pandas in Chengdu?", output="See the **base**.",
                 calls=[("search_travel_info", "call_AbC123xyz", {"query": "pandas 熊猫"},
                         '{"hits": ["Chengdu Research Base"]}', "success")]),
        make_run(conversation, question="Weather in Suzhou tomorrow?", output="Rain, 12 °C.",
                 calls=[("get_weather", "toolu_01Qx9", {"town": "苏州", "days": 1},
                         '{"high_c": 12, "note": "100% chance of rain"}', "success"),
                        ("get_weather", "7hG2kP0aZ", {"town": "Hangzhou"},
                         '{"high_c": 14}', "error")]),
        make_run(conversation, question="What is 3_000 * 2?", output="6000",
                 calls=[("calculator", "call_calc_1", "3_000 * 2", "6000", "success")]),
        make_run(conversation, question="Say hello", output="Hello there, SUZHOU fan!"),
    ]  # fmt: skip


def found(model_admin: AgentRunAdmin, user: User, term: str) -> list[int]:
    """Return the ids of the runs the list shows for ``term`` through ``model_admin``."""
    request = RequestFactory().get(LIST, {"q": term})
    request.user = user
    response = model_admin.changelist_view(request)
    return [run.pk for run in response.context_data["cl"].result_list]


@pytest.mark.parametrize(
    "term",
    [
        "Chengdu",  # a word in a question
        "chengdu",  # any case
        "BASE",  # a word in an answer and a result
        "weather",  # part of a tool name
        "熊猫",  # in arguments, not ASCII
        "苏州",  # arguments and no ASCII: under three characters
        "Hangzhou",  # an argument of a failed call
        "100%",  # a LIKE wildcard taken as itself
        "3_000",  # and the other one
        "call_AbC123xyz",  # a tool_call_id whole
        "toolu_01",  # a tool_call_id's beginning
        '"chance of rain"',  # a phrase in quotes
        "suzhou rain",  # two terms: runs with both
        "nothing-like-this",  # no match
        "hello",
    ],
)
def test_search_finds_the_runs_djangos_icontains_search_found(superuser, runs, term):
    ours = admin.site._registry[AgentRun]
    peer = IContainsRunAdmin(AgentRun, admin.site)
    assert found(ours, superuser, term) == found(peer, superuser, term)


def test_a_runs_number_finds_that_run(client, superuser, runs):
    response = client.get(LIST, {"q": str(runs[1].pk)})
    assert runs[1] in response.context["cl"].result_list


def test_a_tool_call_id_is_found_whole_or_by_its_beginning_not_by_its_middle(superuser, runs):
    ours = admin.site._registry[AgentRun]
    assert found(ours, superuser, "7hG2kP0aZ") == [runs[1].pk]
    assert found(ours, superuser, "7hG2") == [runs[1].pk]
    assert found(ours, superuser, "kP0aZ") == []


def test_the_search_box_says_how_each_field_is_found(client, superuser, runs):
    page = client.get(LIST).content.decode()
    assert SEARCH_HELP.split(";")[0] in page
    assert "tool_call_id whole or its beginning" in SEARCH_HELP


def _plan(term: str) -> str:
    """Return EXPLAIN of the look-up of the runs ``term`` finds (the list page then reads
    those runs by id), the planner kept off full scans of the tables (a handful of rows
    would otherwise be read whole, index or not)."""
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        try:
            return runs_matching(term).explain()
        finally:
            cursor.execute("RESET enable_seqscan")


@on_postgresql
def test_an_exact_tool_call_id_is_looked_up_through_the_columns_index(superuser, runs):
    plan = _plan("call_AbC123xyz")
    assert "chat_agentstep_tool_call_id" in plan, plan


def test_a_term_found_in_more_runs_than_are_looked_up_once_is_searched_per_query(
    superuser, runs, monkeypatch
):
    monkeypatch.setattr("chat.admin_search.KEEP_IDS_UP_TO", 1)
    ours = admin.site._registry[AgentRun]
    peer = IContainsRunAdmin(AgentRun, admin.site)
    assert len(found(ours, superuser, "suzhou")) == 2
    assert found(ours, superuser, "suzhou") == found(peer, superuser, "suzhou")


@on_postgresql
def test_words_are_looked_up_through_the_trigram_indexes(superuser, runs):
    plan = _plan("Chengdu")
    for index in ("message_content_trgm", "run_output_trgm", "step_result_trgm",
                  "step_arguments_trgm", "step_tool_name_trgm"):  # fmt: skip
        assert index in plan, (index, plan)


@on_postgresql
@pytest.mark.django_db(transaction=True)
def test_migrating_again_keeps_the_search_indexes_built_and_rebuilds_an_invalid_one():
    """Migration 0024 is not atomic (CREATE INDEX CONCURRENTLY): a build that fails leaves
    an INVALID index and the others built, and migrating again must not stop at either."""
    migration = import_module("chat.migrations.0024_search_indexes").Migration
    state = MigrationExecutor(connection).loader.project_state(("chat", "0024_search_indexes"))
    names = ("step_result_trgm", "step_arguments_trgm")
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE pg_index SET indisvalid = false WHERE indexrelid = ANY(%s::regclass[])",
            [list(names)],
        )
    with connection.schema_editor(atomic=False) as editor:
        for operation in migration.operations:
            operation.database_forwards("chat", editor, state, state)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, i.indisvalid FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname LIKE '%%_trgm'"
        )
        assert dict(cursor.fetchall()) == {
            "run_output_trgm": True, "step_result_trgm": True, "step_arguments_trgm": True,
            "step_tool_name_trgm": True, "message_content_trgm": True,
        }  # fmt: skip
