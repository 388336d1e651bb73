"""Link each stored question to the one before it in its conversation.

Before branches a conversation was one line of questions; each user message's parent is
the previous user message of its conversation (by creation, then id), the first's none.
"""

from django.db import migrations

BATCH = 2000


def link_parents(apps, schema_editor):
    Message = apps.get_model("chat", "Message")
    rows = (
        Message.objects.filter(role="user")
        .order_by("conversation_id", "created_at", "id")
        .values_list("id", "conversation_id")
    )
    batch = []
    previous_id, previous_conversation = None, None
    for message_id, conversation_id in rows.iterator(chunk_size=BATCH):
        if conversation_id == previous_conversation:
            batch.append(Message(id=message_id, parent_id=previous_id))
        previous_id, previous_conversation = message_id, conversation_id
        if len(batch) >= BATCH:
            Message.objects.bulk_update(batch, ["parent"])
            batch = []
    if batch:
        Message.objects.bulk_update(batch, ["parent"])


class Migration(migrations.Migration):
    dependencies = [("chat", "0019_branches_and_queue")]

    operations = [migrations.RunPython(link_parents, migrations.RunPython.noop)]
