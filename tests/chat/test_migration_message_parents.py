"""Migration 0020 links each stored question to the one before it in its conversation."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("chat", "0019_branches_and_queue")]
AFTER = [("chat", "0020_message_parents")]


@pytest.fixture(autouse=True)
def _back_to_the_latest():
    """Leave the test database migrated to the latest migrations, as the next tests need
    (a later migration's columns would be missing otherwise)."""
    yield
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def test_each_question_gets_the_one_before_it_as_parent() -> None:
    apps = migrate(BEFORE)
    Conversation = apps.get_model("chat", "Conversation")
    Message = apps.get_model("chat", "Message")
    first, second = Conversation.objects.create(), Conversation.objects.create()
    a1 = Message.objects.create(conversation=first, role="user", content="one")
    Message.objects.create(conversation=first, role="assistant", content="answer")
    b1 = Message.objects.create(conversation=second, role="user", content="other")
    a2 = Message.objects.create(conversation=first, role="user", content="two")
    a3 = Message.objects.create(conversation=first, role="user", content="three")

    apps = migrate(AFTER)
    parents = dict(apps.get_model("chat", "Message").objects.values_list("id", "parent_id"))

    assert parents[a1.id] is None and parents[b1.id] is None
    assert parents[a2.id] == a1.id and parents[a3.id] == a2.id
    assert all(parent is None for parent in parents.values() if parent not in (a1.id, a2.id))
