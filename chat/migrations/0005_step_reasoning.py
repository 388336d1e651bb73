"""``AgentStep.reasoning``: a model turn's reasoning ("thinking"), apart from its text.

A database default too (as ``error_type`` in 0004), so rows inserted by raw SQL
(bench/tracedata.py) get "".
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("chat", "0004_step_outcomes"),
    ]

    operations = [
        migrations.AddField(
            model_name="agentstep",
            name="reasoning",
            field=models.TextField(blank=True, db_default="", default=""),
        ),
    ]
