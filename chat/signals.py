"""Signal receivers: a visitor who logs in keeps the chats they had as a guest; feedback
given, changed or withdrawn is sent to live telemetry; a row redacted for display is never saved
(:mod:`chat.traces.viewing`)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.signals import user_logged_in
from django.db.models.signals import post_delete, post_save, pre_save
from django.dispatch import receiver
from django.http import HttpRequest

from chat import store
from chat.models import Feedback
from chat.traces import live as telemetry
from chat.traces.viewing import TEXT_FIELDS, refuse_saving_redacted

for _model in TEXT_FIELDS:
    uid = f"chat.refuse_redacted.{_model.__name__}"
    pre_save.connect(refuse_saving_redacted, sender=_model, dispatch_uid=uid)


@receiver(user_logged_in, dispatch_uid="chat.adopt_guest_conversations")
def adopt_guest_conversations(
    sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any
) -> None:
    """Move the guest's conversations (by the guest key in the session) to ``user``."""
    session = getattr(request, "session", None)
    if session is None:
        return
    guest_key = session.get(store.GUEST_KEY, "")
    store.conversations_adopt(guest_key=guest_key, user_id=user.pk)
    session.pop(store.GUEST_KEY, None)


@receiver(post_save, sender=Feedback, dispatch_uid="chat.feedback_to_telemetry")
def feedback_to_telemetry(sender: Any, instance: Feedback, **kwargs: Any) -> None:
    """Send feedback given or changed as the ``gen_ai.evaluation.result`` event of its
    run's span (:func:`chat.traces.live.feedback_saved`; nothing when live export is off)."""
    telemetry.feedback_saved(instance.pk)


@receiver(post_delete, sender=Feedback, dispatch_uid="chat.feedback_withdrawn_to_telemetry")
def feedback_withdrawn_to_telemetry(sender: Any, instance: Feedback, **kwargs: Any) -> None:
    """Send feedback taken back as a ``gen_ai.evaluation.result`` event saying so
    (:func:`chat.traces.live.feedback_withdrawn`; nothing when live export is off)."""
    telemetry.feedback_withdrawn(instance.run_id, instance.given_by_name)
