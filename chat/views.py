"""HTTP views: the chat page and "new chat"."""

from __future__ import annotations

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from agents.demo.scenarios import EXAMPLES
from chat import store
from chat.forms import StrategyForm
from chat.live import interrupt_stale_runs, publish_each_sync
from chat.models import TOOL_CHOICE_AUTO, Conversation
from chat.runs import get_tools, model_badge

SIDEBAR_LENGTH = 200
COOKIE_CHECK = "welcome"


def _owner(request: HttpRequest, *, create: bool = False) -> store.Owner:
    """Return the request's owner; ``create`` gives a new visitor a guest key."""
    return store.Owner.of(request.user, request.session, create=create)


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    """Redirect to the owner's empty conversation, or to a new one.

    A first-time visitor is given a guest key and sent round once to check that the
    browser keeps cookies: clients that do not (crawlers, scripts) get a page saying so,
    and no conversation row is written for each of their requests.
    """
    owner = _owner(request)
    if owner.user_id is None and not owner.guest_key:
        if request.GET.get(COOKIE_CHECK):
            return render(request, "chat/cookies_needed.html", status=403)
        _owner(request, create=True)
        return redirect(f"{reverse('chat:home')}?{COOKIE_CHECK}=1")
    conversation = store.conversation_get_or_create_empty(owner=owner)
    return redirect("chat:conversation", conversation_id=conversation.pk)


@require_POST
def new_conversation(request: HttpRequest) -> HttpResponse:
    """Start a new chat (reusing an empty one) and open it."""
    conversation = store.conversation_get_or_create_empty(owner=_owner(request, create=True))
    return redirect("chat:conversation", conversation_id=conversation.pk)


@require_GET
def conversation_page(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Render a conversation with every stored run and step; 404 unless it is yours."""
    owner = _owner(request)
    conversation = store.conversation_get(owner=owner, conversation_id=conversation_id)
    if conversation is None:
        raise Http404("No such conversation.")
    publish_each_sync(interrupt_stale_runs(conversation_id=conversation.pk, now=timezone.now()))
    editable = not store.conversation_started(conversation_id=conversation.pk)
    context = {
        **settings_context(conversation, editable=editable),
        "conversation": conversation,
        "conversations": store.conversations_for_owner(owner=owner)[:SIDEBAR_LENGTH],
        "runs": store.conversation_runs(conversation_id=conversation.pk),
        "ws_path": f"/ws/chat/{conversation.pk}/",
        "model_badge": model_badge(),
        "examples": EXAMPLES,
        "max_message_chars": settings.CHAT_MAX_MESSAGE_CHARS,
    }
    return render(request, "chat/page.html", context)


def settings_context(
    conversation: Conversation, *, editable: bool, error: str = ""
) -> dict[str, object]:
    """Return the context of ``chat/_settings.html`` (the strategy picker or badge)."""
    names = [tool.name for tool in get_tools()] if editable else []
    return {
        "conversation": conversation,
        "settings_editable": editable,
        "settings_error": error,
        "settings_form": StrategyForm.of(conversation, tool_names=names),
    }


@require_POST
def conversation_strategy(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Set a new conversation's strategy and native options; answer with the picker.

    404 unless the conversation is the requester's; 400 with the errors for values that
    are not allowed; 409 once the conversation has messages (the badge comes back). A
    request not made by htmx is redirected to the conversation.
    """
    owner = _owner(request)
    conversation = store.conversation_get(owner=owner, conversation_id=conversation_id)
    if conversation is None:
        raise Http404("No such conversation.")
    if store.conversation_started(conversation_id=conversation.pk):
        # Fixed at the first message, whatever was posted (valid or not).
        if not request.headers.get("HX-Request"):
            return redirect("chat:conversation", conversation_id=conversation.pk)
        context = settings_context(conversation, editable=False)
        return render(request, "chat/_settings.html", context, status=409)
    form = StrategyForm(request.POST, tool_names=[tool.name for tool in get_tools()])
    status, error = 200, ""
    if not form.is_valid():
        status = 400
        error = " ".join(str(e) for errors in form.errors.values() for e in errors)
    else:
        values = dict(form.cleaned_data)
        if not conversation.uses_native_tool_calls:
            # The native options were not on the form: coming back to native calls starts
            # from their defaults, not from the unticked box that was not there.
            values.update(tool_choice=TOOL_CHOICE_AUTO, parallel_tool_calls=True)
        try:
            conversation = (
                store.conversation_configure(owner=owner, conversation_id=conversation.pk, **values)
                or conversation
            )
        except store.ConversationStarted:  # the first message came in meanwhile
            if not request.headers.get("HX-Request"):
                return redirect("chat:conversation", conversation_id=conversation.pk)
            context = settings_context(conversation, editable=False)
            return render(request, "chat/_settings.html", context, status=409)
    if not request.headers.get("HX-Request"):
        return redirect("chat:conversation", conversation_id=conversation.pk)
    context = settings_context(conversation, editable=True, error=error)
    return render(request, "chat/_settings.html", context, status=status)
