"""A conversation its owner deleted from their list is hidden, its runs kept for audit.

``Conversation.hidden_at`` is when the owner deleted it; null for every existing one.
Follows 0006 (configured models).
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0008_timeline"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="hidden_at",
            field=models.DateTimeField(
                blank=True, null=True, verbose_name="deleted by its owner at"
            ),
        ),
    ]
