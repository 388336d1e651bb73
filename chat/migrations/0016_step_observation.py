from django.db import migrations, models


class Migration(migrations.Migration):
    """A tool call's observation: what the model was given. Older rows stay null (not
    recorded): it is not rebuilt from settings that may have changed since."""

    dependencies = [
        ("chat", "0015_run_owner_channel"),
    ]

    operations = [
        migrations.AddField(
            model_name="agentstep",
            name="observation",
            field=models.TextField(blank=True, null=True),
        ),
    ]
