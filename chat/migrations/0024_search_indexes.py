"""Trigram indexes for the admin's run search (chat.admin_search), on PostgreSQL only.

pg_trgm's GIN indexes answer ``ILIKE '%term%'`` on the question, the answer, the tool name,
the arguments (as text) and the result. Built ``CONCURRENTLY``: at 3,000,000 steps the
build takes minutes (docs/benchmarks.md), and runs must go on recording meanwhile. A build
that fails leaves an INVALID index: drop it and migrate again. SQLite records the indexes
in the migration state and creates nothing (its search reads every row, as before).
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


class AddPostgresIndexConcurrently(AddIndexConcurrently):
    """Build the index concurrently on PostgreSQL; only record it elsewhere."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if _on_postgresql(schema_editor):
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if _on_postgresql(schema_editor):
            super().database_backwards(app_label, schema_editor, from_state, to_state)


class RunPostgresSQL(migrations.RunSQL):
    """Run the SQL on PostgreSQL only."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if _on_postgresql(schema_editor):
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
        RunPostgresSQL(
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS step_arguments_trgm "
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
