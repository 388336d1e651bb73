"""HTTP views: the chat page, "new chat" and the conversation list (search, rename,
delete)."""

from __future__ import annotations

import contextlib

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect, HttpResponseClientRefresh

from chat import fragments, live, store
from chat.agents import agent_choices, agent_settings, allowed_models, find_agent
from chat.catalog import code_tools_for, model_badge, model_choices
from chat.forms import ConversationTitleForm, StrategyForm
from chat.live import interrupt_stale_runs, publish_each_sync
from chat.models import TOOL_CHOICE_AUTO, Conversation
from chat.owner import request_stop_sync
from chat.store.usage import conversation_usage
from chat.timeline import timeline_of
from chat.validation import TOO_LONG_REASON

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
    conversation = store.conversation_get_or_create_empty(owner=owner, **_new_chat_settings())
    return redirect("chat:conversation", conversation_id=conversation.pk)


@require_POST
def new_conversation(request: HttpRequest) -> HttpResponse:
    """Start a new chat (reusing an empty one) and open it."""
    owner = _owner(request, create=True)
    conversation = store.conversation_get_or_create_empty(owner=owner, **_new_chat_settings())
    return redirect("chat:conversation", conversation_id=conversation.pk)


def _new_chat_settings() -> dict[str, str]:
    """Return the model and strategy a new chat starts with: the default agent's."""
    agent = find_agent("")
    assert agent is not None  # an agents file defines one at least
    keys = [key for key, _ in model_choices()]
    model_key, strategy = agent_settings(
        agent, model_key=keys[0], strategy=settings.AGENT_STRATEGY, model_keys=keys
    )
    return {"model_key": model_key, "strategy": strategy}


# The page is the conversation's state when it was drawn: Back (from the compare page, say)
# must draw it again, not show a copy from before a message, a rename or a switch of branch.
@never_cache
@require_GET
def conversation_page(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Render a conversation's newest ``CHAT_PAGE_EXCHANGES`` runs with their steps, and a
    "Show earlier messages" control when there are older ones; 404 unless it is yours.

    A bounded number of queries whatever the conversation's length.
    """
    owner = _owner(request)
    conversation = store.conversation_get(owner=owner, conversation_id=conversation_id)
    if conversation is None:
        raise Http404("No such conversation.")
    editable = not store.conversation_started(conversation_id=conversation.pk)
    if editable:
        # No message yet, so no run (a run is stored with its message): no stale run to
        # sweep and no window to read (the page every new chat opens on).
        window = store.RunWindow(runs=[], earlier=None)
        queued = []
    else:
        now = timezone.now()
        publish_each_sync(interrupt_stale_runs(conversation_id=conversation.pk, now=now))
        window = store.runs_window(
            conversation_id=conversation.pk, exchanges=settings.CHAT_PAGE_EXCHANGES
        )
        queued = store.queue_list(conversation_id=conversation.pk)
    context = {
        **settings_context(conversation, editable=editable),
        "conversation": conversation,
        **list_context(owner, query=request.GET.get("q", ""), active=conversation.pk),
        "runs": window.runs,
        "earlier": window.earlier,
        # Summed as the live header is (a fork's inherited runs, earlier pages and other
        # takes alike), not from the runs this page renders.
        "usage": conversation_usage(conversation_id=conversation.pk),
        "queued": queued,
        "ws_path": f"/ws/chat/{conversation.pk}/",
        "model_badge": model_badge(model_key=conversation.model_key),
        "agent": find_agent(conversation.agent_key),
        "max_message_chars": settings.CHAT_MAX_MESSAGE_CHARS,
        "too_long": TOO_LONG_REASON,
    }
    return render(request, "chat/page.html", context)


@require_GET
def conversation_earlier(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Return the ``CHAT_PAGE_EXCHANGES`` runs before run ``before`` (a fragment).

    The page's "Show earlier messages" control swaps itself for this: the runs, oldest
    first, after a control for the window before them if there is one
    (``chat/_earlier.html``, ``static/js/earlier.js``). 400 if ``before`` is missing or
    not a number; 404 unless the conversation is yours and ``before`` is one of its runs.
    Three queries for the runs whatever the conversation's length.
    """
    before = _number(request.GET.get("before", ""))
    if before is None:
        return HttpResponseBadRequest(
            "before must be the id of a run", content_type="text/plain; charset=utf-8"
        )
    conversation = _yours_or_404(request, conversation_id)
    try:
        window = store.runs_window(
            conversation_id=conversation.pk,
            exchanges=settings.CHAT_PAGE_EXCHANGES,
            before=before,
        )
    except store.RunNotInConversation:
        raise Http404("No such run in this conversation.") from None
    context = {"conversation": conversation, "runs": window.runs, "earlier": window.earlier}
    return render(request, "chat/_earlier_loaded.html", context)


@require_GET
def run_steps(request: HttpRequest, conversation_id: int, run_id: int) -> HttpResponse:
    """Return an ended run's steps before ordinal ``before`` (a fragment of step cards).

    An ended run shows its last ``CHAT_RUN_STEPS_SHOWN`` steps; its "Show the N earlier
    steps" control swaps itself for these. 400 if ``before`` is missing or not a number;
    404 unless the conversation is yours and the run is one of its runs.
    """
    before = _number(request.GET.get("before", ""))
    if before is None:
        return HttpResponseBadRequest(
            "before must be a step's ordinal", content_type="text/plain; charset=utf-8"
        )
    conversation = _yours_or_404(request, conversation_id)
    try:
        steps = store.run_steps_before(
            conversation_id=conversation.pk, run_id=run_id, before=before
        )
    except store.RunNotInConversation:
        raise Http404("No such run in this conversation.") from None
    return render(request, "chat/_steps.html", {"steps": steps})


@require_GET
def run_timeline(request: HttpRequest, conversation_id: int, run_id: int) -> HttpResponse:
    """Return a run's timeline bars (``chat/_timeline_body.html``), for an ended run whose
    page shows only its last steps: its folded timeline loads them when it opens.

    404 unless the conversation is yours and the run is one of its runs.
    """
    conversation = _yours_or_404(request, conversation_id)
    try:
        run = store.run_with_steps_of(conversation_id=conversation.pk, run_id=run_id)
    except store.RunNotInConversation:
        raise Http404("No such run in this conversation.") from None
    timeline = timeline_of(run, list(run.steps.all()), now=timezone.now())
    return render(request, "chat/_timeline_body.html", {"timeline": timeline})


def _yours_or_404(request: HttpRequest, conversation_id: int) -> Conversation:
    """Return the conversation if it is the requester's; raise ``Http404`` otherwise."""
    conversation = store.conversation_get(owner=_owner(request), conversation_id=conversation_id)
    if conversation is None:
        raise Http404("No such conversation.")
    return conversation


def _number(value: str) -> int | None:
    """Return ``value`` as a database id or ordinal, or None if it is not one."""
    # isdigit() alone lets "²" through, which int() refuses; 18 digits fit a bigint.
    if value.isascii() and value.isdigit() and len(value) <= 18:
        return int(value)
    return None


def settings_context(
    conversation: Conversation, *, editable: bool, error: str = "", oob_badge: bool = False
) -> dict[str, object]:
    """Return the context of ``chat/_settings.html`` (the picker, or the settings badge).

    A started conversation whose model is no longer configured (``model_stale``) gets a
    menu of the configured models beside its badge: it can answer again once it has one.
    ``oob_badge`` also sends the header's model badge (the picker's answer updates it).
    """
    agent = find_agent(conversation.agent_key)
    names = [tool.name for tool in code_tools_for(conversation.agent_key)] if editable else []
    models = model_choices()
    stale = conversation.model_key not in dict(models)
    if agent is not None:  # the picker, or the menu replacing a model gone
        models = allowed_models(agent, models)
    form = StrategyForm.of(
        conversation, tool_names=names, models=models, agents=agent_choices(),
        strategies=agent.strategies if agent is not None else (),
    )  # fmt: skip
    return {
        "conversation": conversation,
        "agent": agent,
        "settings_editable": editable,
        "settings_error": error,
        "settings_form": form,
        "model_stale": stale,
        "oob_badge": oob_badge,
        "model_badge": model_badge(model_key=conversation.model_key),
    }


def _replace_stale_model(
    request: HttpRequest, owner: store.Owner, conversation: Conversation
) -> HttpResponse:
    """Answer a picker post to a started conversation: only a gone model may be replaced.

    400 for a key that is not configured; 409 (the badge) when the conversation's model is
    still configured, as for any other change once it has messages.
    """
    models = model_choices()
    if conversation.model_key in dict(models):
        if not request.htmx:
            return redirect("chat:conversation", conversation_id=conversation.pk)
        context = settings_context(conversation, editable=False)
        return render(request, "chat/_settings.html", context, status=409)
    picked = request.POST.get("model", "")
    agent = find_agent(conversation.agent_key)
    if agent is not None:
        models = allowed_models(agent, models)
    status, error = 200, ""
    if picked not in dict(models):
        status, error = 400, f"Pick one of the configured models, not {picked[:80]!r}."
    else:
        conversation = (
            store.conversation_replace_model(
                owner=owner,
                conversation_id=conversation.pk,
                old_key=conversation.model_key,
                model_key=picked,
            )
            or conversation
        )
    if not request.htmx:
        return redirect("chat:conversation", conversation_id=conversation.pk)
    context = settings_context(conversation, editable=False, error=error, oob_badge=True)
    return render(request, "chat/_settings.html", context, status=status)


@require_POST
def conversation_strategy(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Set a new conversation's model, strategy and native options; answer with the picker.

    404 unless the conversation is the requester's; 400 with the errors for values that
    are not allowed; 409 once the conversation has messages (the badge comes back),
    unless its model is no longer configured: then only ``model`` is read, and set. The
    answer carries the header's model badge too. A request not made by htmx is
    redirected to the conversation.
    """
    owner = _owner(request)
    conversation = store.conversation_get(owner=owner, conversation_id=conversation_id)
    if conversation is None:
        raise Http404("No such conversation.")
    if store.conversation_started(conversation_id=conversation.pk):
        # Fixed at the first message, whatever was posted (valid or not), but for a model
        # that is no longer configured.
        return _replace_stale_model(request, owner, conversation)
    agent = find_agent(conversation.agent_key)
    picked = find_agent(request.POST.get("agent", "")) if request.POST.get("agent") else agent
    if picked is None:
        return _settings_refused(request, conversation, "Pick one of the defined agents.")
    if agent is None or picked.name != agent.name:
        return _switch_agent(request, owner, conversation, picked.name)
    form = StrategyForm(
        request.POST,
        tool_names=[tool.name for tool in code_tools_for(conversation.agent_key)],
        models=allowed_models(picked, model_choices()),
        default_model=conversation.model_key,
        agents=agent_choices(),
        default_agent=picked.name,
        strategies=picked.strategies,
    )
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
            if not request.htmx:
                return redirect("chat:conversation", conversation_id=conversation.pk)
            context = settings_context(conversation, editable=False)
            return render(request, "chat/_settings.html", context, status=409)
    if not request.htmx:
        return redirect("chat:conversation", conversation_id=conversation.pk)
    context = settings_context(conversation, editable=True, error=error, oob_badge=True)
    return render(request, "chat/_settings.html", context, status=status)


def _settings_refused(request: HttpRequest, conversation: Conversation, error: str) -> HttpResponse:
    """Answer a picker post that names no defined agent: 400 with the picker and why."""
    if not request.htmx:
        return redirect("chat:conversation", conversation_id=conversation.pk)
    context = settings_context(conversation, editable=True, error=error)
    return render(request, "chat/_settings.html", context, status=400)


def _switch_agent(
    request: HttpRequest, owner: store.Owner, conversation: Conversation, agent_key: str
) -> HttpResponse:
    """Give a new chat another agent, with the model and strategy it starts with, and
    reload the page: the empty chat's introduction, starters and placeholder are the
    agent's (htmx's ``HX-Refresh``; a plain form post is redirected)."""
    agent = find_agent(agent_key)
    assert agent is not None
    keys = [key for key, _ in model_choices()]
    model_key, strategy = agent_settings(
        agent, model_key=conversation.model_key, strategy=conversation.strategy, model_keys=keys
    )
    # A first message that came in meanwhile fixed the agent: the reload shows which.
    with contextlib.suppress(store.ConversationStarted):
        store.conversation_configure(
            owner=owner, conversation_id=conversation.pk, strategy=strategy,
            tool_choice=TOOL_CHOICE_AUTO, parallel_tool_calls=True, model_key=model_key,
            agent_key=agent.name,
        )  # fmt: skip
    if not request.htmx:
        return redirect("chat:conversation", conversation_id=conversation.pk)
    return HttpResponseClientRefresh()


def list_context(owner: store.Owner, *, query: str, active: int | None) -> dict[str, object]:
    """Return the context of ``chat/_conversation_list.html``: the owner's list, by date.

    One query whatever the number of conversations (:func:`chat.store.conversations_listed`,
    at most ``LIST_LENGTH`` of them); ``active`` is the open conversation's id.
    """
    conversations = store.conversations_listed(owner=owner, query=query)
    return {
        "conversations": conversations,
        "groups": store.grouped_by_date(conversations, today=timezone.localdate()),
        "list_full": len(conversations) >= store.LIST_LENGTH,
        "query": store.clean_query(query),
        "active": active,
    }


def _active(request: HttpRequest) -> int | None:
    """Return the id of the conversation the page shows (``active`` in the request)."""
    value = request.POST.get("active") or request.GET.get("active") or ""
    # isdigit() alone lets "²" through, which int() refuses.
    return int(value) if value.isascii() and value.isdigit() else None


def _list_response(
    request: HttpRequest, owner: store.Owner, *, status: int = 200, **extra: object
) -> HttpResponse:
    """Answer htmx with the list re-rendered, keeping the search in the request (``q``)."""
    query = request.POST.get("q") or request.GET.get("q") or ""
    context = {**list_context(owner, query=query, active=_active(request)), **extra}
    return render(request, "chat/_conversation_list.html", context, status=status)


@require_GET
def conversation_list(request: HttpRequest) -> HttpResponse:
    """Return the owner's conversation list (a fragment), searched by ``q`` if given.

    ``q`` matches titles and messages (questions and answers); ``active`` marks the open
    conversation. Someone with no conversations (or no session) gets an empty list.
    """
    return _list_response(request, _owner(request))


@require_GET
def conversation_menu(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Return a conversation's menu (rename, download its runs, and delete with what
    happens to its runs).

    Loaded when the menu first opens, so the list does not carry 200 forms. 404 unless
    it is the requester's.
    """
    listed = store.conversations_listed(owner=_owner(request), conversation_id=conversation_id)
    if not listed:
        raise Http404("No such conversation.")
    context = {"item": listed[0], "active": _active(request)}
    return render(request, "chat/_conversation_menu.html", context)


@require_POST
def conversation_rename(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Rename a conversation; answer htmx with the list (and the header's title).

    404 unless it is the requester's; 400 with the list showing the error for a title
    that is empty once trimmed or over 200 characters. A request not made by htmx is
    redirected to the conversation (400 as text on an error).
    """
    owner = _owner(request)
    if store.conversation_get(owner=owner, conversation_id=conversation_id) is None:
        raise Http404("No such conversation.")
    form = ConversationTitleForm(request.POST)
    if not form.is_valid():
        error = " ".join(form.errors["title"])
        if not request.htmx:
            return HttpResponse(error, status=400, content_type="text/plain; charset=utf-8")
        return _list_response(
            request, owner, status=400, rename_id=conversation_id, rename_error=error
        )
    conversation = store.conversation_rename(
        owner=owner, conversation_id=conversation_id, title=form.cleaned_data["title"]
    )
    # Every open tab of the conversation follows (this one too: the swap is idempotent).
    live.conversation_renamed_sync(conversation_id, fragments.conversation_renamed(conversation))
    if not request.htmx:
        return redirect("chat:conversation", conversation_id=conversation_id)
    response = _list_response(request, owner, renamed_id=conversation_id)
    if _active(request) == conversation_id:
        title = render_to_string("chat/_title.html", {"conversation": conversation, "oob": True})
        response.content += title.encode()
    return response


@require_POST
def conversation_delete(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Delete a conversation from its owner's list; runs stay for audit until purge.

    See :func:`chat.store.conversation_delete`: hidden if it has messages, deleted if
    not. 404 unless it is the requester's. A run still going, or waiting for a decision on
    a tool call, is stopped (it stays, as cancelled, with the others), and the
    conversation's open sockets, in any tab or process, are closed (4404). Deleting the
    open conversation (``active``) goes to a new chat (htmx: ``HX-Redirect``); another
    answers htmx with the list.
    """
    owner = _owner(request)
    now = timezone.now()
    deleted = store.conversation_delete(owner=owner, conversation_id=conversation_id, at=now)
    if deleted is None:
        raise Http404("No such conversation.")
    request_stop_sync(conversation_id)
    live.conversation_deleted_sync(conversation_id)
    active = _active(request)
    if request.htmx:
        if active == conversation_id or active is None:
            return HttpResponseClientRedirect(reverse("chat:home"))
        return _list_response(request, owner)
    if active is not None and active != conversation_id:
        return redirect("chat:conversation", conversation_id=active)
    return redirect("chat:home")
