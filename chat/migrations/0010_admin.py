# The status label says "model turn", like the chat, the admin and the CSV docs (issue 11).
# Labels only: no column changes.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0009_sidebar"),
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
                ],
                db_index=True,
                default="running",
                max_length=20,
            ),
        ),
    ]
