"""``AgentStep.result_blocks`` and ``AgentStep.artifact``: what a tool returned besides text.

Content blocks (an image, a file) and a ``content_and_artifact`` tool's artifact, kept for
the card and the audit trail; the model reads only ``result`` (text, images as notes).
"""

from django.db import migrations, models

import chat.models


class Migration(migrations.Migration):

    dependencies = [
        ("chat", "0012_approvals"),
    ]

    operations = [
        migrations.AddField(
            model_name="agentstep",
            name="result_blocks",
            field=models.JSONField(blank=True, encoder=chat.models.UnicodeJSONEncoder, null=True),
        ),
        migrations.AddField(
            model_name="agentstep",
            name="artifact",
            field=models.JSONField(blank=True, encoder=chat.models.UnicodeJSONEncoder, null=True),
        ),
    ]
