"""Drop the database defaults that only the benchmarks' raw inserts relied on.

The app writes every row through the ORM, which always sends these columns (their
Python defaults); bench/tracedata.py now names every column itself. Old code still
running during a rolling deploy writes them too, so dropping the defaults is safe then.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0016_step_observation"),
    ]

    operations = [
        migrations.AlterField(
            model_name="conversation",
            name="model_key",
            field=models.CharField(default="default", max_length=32),
        ),
        migrations.AlterField(
            model_name="conversation",
            name="agent_key",
            field=models.CharField(blank=True, default="", max_length=32, verbose_name="agent"),
        ),
        migrations.AlterField(
            model_name="agentrun",
            name="agent_key",
            field=models.CharField(blank=True, db_index=True, default="", max_length=32, verbose_name="agent"),
        ),
        migrations.AlterField(
            model_name="agentrun",
            name="endpoint",
            field=models.CharField(blank=True, default="", max_length=255),
        ),
        migrations.AlterField(
            model_name="agentrun",
            name="waited_ms",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AlterField(
            model_name="agentrun",
            name="cost_currency",
            field=models.CharField(blank=True, default="", max_length=3),
        ),
        migrations.AlterField(
            model_name="agentstep",
            name="error_type",
            field=models.CharField(blank=True, db_index=True, default="", max_length=100),
        ),
        migrations.AlterField(
            model_name="agentstep",
            name="reasoning",
            field=models.TextField(blank=True, default=""),
        ),
    ]
