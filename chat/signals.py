"""Signal receivers: a visitor who logs in keeps the chats they had as a guest."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.signals import user_logged_in
from django.dispatch import receiver
from django.http import HttpRequest

from chat import store


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
