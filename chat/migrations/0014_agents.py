import django.db.models.deletion
from django.db import migrations, models

import chat.models


def travel_before_agents(apps, schema_editor):
    """Conversations and runs from before agents were definitions were the travel
    assistant's: the only agent there was. Their snapshot stays unknown (None)."""
    apps.get_model("chat", "Conversation").objects.update(agent_key="travel")
    apps.get_model("chat", "AgentRun").objects.update(agent_key="travel")


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0013_step_result_blocks"),
    ]

    operations = [
        migrations.CreateModel(
            name="AgentSnapshot",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("digest", models.CharField(max_length=64, unique=True)),
                ("content", models.JSONField(encoder=chat.models.UnicodeJSONEncoder)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
            ],
            options={"ordering": ["-created_at", "-id"]},
        ),
        migrations.AddField(
            model_name="conversation",
            name="agent_key",
            field=models.CharField(blank=True, db_default="", default="", max_length=32, verbose_name="agent"),
        ),
        migrations.AddField(
            model_name="agentrun",
            name="agent_key",
            field=models.CharField(blank=True, db_default="", db_index=True, default="", max_length=32, verbose_name="agent"),
        ),
        migrations.AddField(
            model_name="agentrun",
            name="snapshot",
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name="runs", to="chat.agentsnapshot"),
        ),
        migrations.RunPython(travel_before_agents, migrations.RunPython.noop, elidable=True),
    ]
