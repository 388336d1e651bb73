"""Say who made a conversation's title, so a model-made title never replaces one its owner
gave. Existing conversations are marked as titled from their question: a model title is
only asked for after a conversation's first run, which theirs are long past."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0022_queue"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="title_source",
            field=models.CharField(
                choices=[
                    ("question", "Made from the first question"),
                    ("model", "Made by the model"),
                    ("owner", "Given by its owner"),
                ],
                default="question",
                max_length=16,
            ),
        ),
    ]
