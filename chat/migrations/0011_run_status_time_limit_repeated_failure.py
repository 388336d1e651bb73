# Two ways a run ends, from LangChain's AgentExecutor (issue 13): its wall-clock budget
# ran out (AGENT_MAX_EXECUTION_TIME_S), or the same tool call kept failing. Labels only:
# the column is unchanged.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0010_admin"),
    ]

    operations = [
        migrations.AlterField(
            model_name="agentrun",
            name="status",
            field=models.CharField(
                choices=[
                    ("running", "Running"),
                    ("succeeded", "Succeeded"),
                    ("failed", "Failed"),
                    ("cancelled", "Cancelled"),
                    ("max_iterations", "Model turn limit reached"),
                    ("interrupted", "Interrupted"),
                    ("time_limit", "Time limit reached"),
                    ("repeated_failure", "Stopped: same call kept failing"),
                ],
                db_index=True,
                default="running",
                max_length=20,
            ),
        ),
    ]
