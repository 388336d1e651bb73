"""Trigram indexes for the admin's run search (chat.admin_search), on PostgreSQL only.

pg_trgm's GIN indexes answer ``ILIKE '%term%'`` on the question, the answer, the tool name,
the arguments (as text) and the result. Built ``CONCURRENTLY``: at 3,000,000 steps the
build takes minutes (docs/benchmarks.md), and runs must go on recording meanwhile.
Migrating again after a failure keeps the indexes built and builds an INVALID one again.
SQLite records the indexes in the migration state and creates nothing (its search reads
every row, as before).
``CREATE EXTENSION pg_trgm`` needs the database's owner (pg_trgm is a trusted extension)
or a superuser (docs/deploy.md).
"""

import django.contrib.postgres.indexes
from django.contrib.postgres.operations import AddIndexConcurrently, TrigramExtension
from django.db import migrations


def _on_postgresql(schema_editor) -> bool:
    return schema_editor.connection.vendor == "postgresql"


class PostgresTrigramExtension(TrigramExtension):
    """``CREATE EXTENSION pg_trgm`` on PostgreSQL; nothing elsewhere, either way."""

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if _on_postgresql(schema_editor):
            super().database_backwards(app_label, schema_editor, from_state, to_state)


def _index_valid(schema_editor, name: str) -> bool | None:
    """Return whether the index ``name`` is valid; None when there is none."""
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE c.relname = %s",
            [name],
        )
        row = cursor.fetchone()
    return None if row is None else row[0]


class AddPostgresIndexConcurrently(AddIndexConcurrently):
    """Build the index concurrently on PostgreSQL; only record it elsewhere.

    Migrating again after a failure (the migration is not atomic) keeps the indexes
    already built and builds again one a failed build left INVALID.
    """

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if not _on_postgresql(schema_editor):
            return
        valid = _index_valid(schema_editor, self.index.name)
        if valid:
            return
        if valid is False:
            schema_editor.execute(f'DROP INDEX CONCURRENTLY "{self.index.name}"')
        super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if _on_postgresql(schema_editor):
            super().database_backwards(app_label, schema_editor, from_state, to_state)


class AddPostgresIndexSQL(migrations.RunSQL):
    """Create the index ``name`` with SQL on PostgreSQL only, as
    :class:`AddPostgresIndexConcurrently` does (kept if valid, built again if not)."""

    def __init__(self, name: str, sql: str, reverse_sql: str):
        self.name = name
        super().__init__(sql, reverse_sql)

    def deconstruct(self):
        name, args, kwargs = super().deconstruct()
        return name, args, {**kwargs, "name": self.name}

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if not _on_postgresql(schema_editor):
            return
        valid = _index_valid(schema_editor, self.name)
        if valid:
            return
        if valid is False:
            schema_editor.execute(f'DROP INDEX CONCURRENTLY "{self.name}"')
        super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if _on_postgresql(schema_editor):
            super().database_backwards(app_label, schema_editor, from_state, to_state)


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run in a transaction

    dependencies = [
        ("chat", "0023_titles"),
    ]

    operations = [
        PostgresTrigramExtension(),
        AddPostgresIndexConcurrently(
            model_name="agentrun",
            index=django.contrib.postgres.indexes.GinIndex(
                fields=["output"], name="run_output_trgm", opclasses=["gin_trgm_ops"]
            ),
        ),
        AddPostgresIndexConcurrently(
            model_name="agentstep",
            index=django.contrib.postgres.indexes.GinIndex(
                fields=["result"], name="step_result_trgm", opclasses=["gin_trgm_ops"]
            ),
        ),
        # Not in the model's Meta: an expression with an operator class needs
        # django.contrib.postgres installed to be spelt right.
        AddPostgresIndexSQL(
            "step_arguments_trgm",
            "CREATE INDEX CONCURRENTLY step_arguments_trgm "
            "ON chat_agentstep USING gin ((arguments::text) gin_trgm_ops)",
            "DROP INDEX CONCURRENTLY IF EXISTS step_arguments_trgm",
        ),
        AddPostgresIndexConcurrently(
            model_name="agentstep",
            index=django.contrib.postgres.indexes.GinIndex(
                fields=["tool_name"], name="step_tool_name_trgm", opclasses=["gin_trgm_ops"]
            ),
        ),
        AddPostgresIndexConcurrently(
            model_name="message",
            index=django.contrib.postgres.indexes.GinIndex(
                fields=["content"], name="message_content_trgm", opclasses=["gin_trgm_ops"]
            ),
        ),
    ]
