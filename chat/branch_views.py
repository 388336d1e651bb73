"""HTTP views of branches: switch the branch a conversation shows, and fork it.

Retry, regenerate and edit start runs, so they go through the chat's socket like a
message (:meth:`chat.consumers.ChatConsumer._branch`); these two start none.
"""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect

from chat import fragments, store
from chat.live import publish_each_sync
from chat.store.branches import NOT_A_QUESTION


def _question(request: HttpRequest) -> int | None:
    """Return the posted ``question`` id, or None when it is not a row id."""
    value = request.POST.get("question", "")
    return int(value) if value.isascii() and value.isdigit() and len(value) <= 18 else None


def _refused(message: str, status: int) -> HttpResponse:
    """Return the page's notice saying why nothing changed (htmx swaps 400/409 in)."""
    response = HttpResponse(fragments.error(message), status=status)
    response["HX-Reswap"] = "none"  # the notice is out-of-band: the list stays as it is
    return response


@require_POST
def branch_switch(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Show the branch of the posted ``question`` (the switcher's arrows): every open tab
    of the conversation is sent the branch now shown (:func:`chat.fragments.branch_shown`),
    this one in the answer too.

    404 unless the conversation is the requester's; 400 for a ``question`` that is not
    one of its questions; 409 while a run of it is going or waiting. A request not made by
    htmx is redirected to the conversation.
    """
    owner = store.Owner.of(request.user, request.session)
    question = _question(request)
    if store.conversation_get(owner=owner, conversation_id=conversation_id) is None:
        raise Http404("No such conversation.")
    try:
        conversation = store.branch_switch(
            owner=owner, conversation_id=conversation_id, question_id=question or 0
        )
    except store.BranchRefused as exc:
        status = 400 if str(exc) == NOT_A_QUESTION else 409
        if not request.htmx:
            return HttpResponse(str(exc), status=status, content_type="text/plain; charset=utf-8")
        return _refused(str(exc), status)
    if conversation is None:
        raise Http404("No such conversation.")
    shown = fragments.branch_shown(conversation, oob=False)
    publish_each_sync([(conversation.pk, fragments.list_replaced(shown))])
    if not request.htmx:
        return redirect("chat:conversation", conversation_id=conversation.pk)
    # Swapped into the list by the switcher itself (hx-target), the notice out of band.
    return HttpResponse(shown + fragments.error(""))


@require_POST
def conversation_fork(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """Start a new conversation continuing after the posted ``question`` and open it.

    The fork shows the source's exchanges up to that one, read only, and its runs are
    sent them as history (:func:`chat.store.conversation_fork`). 404 unless the
    conversation is the requester's and the question is on a branch of it; 409 while the
    question's run is going or waiting. htmx is answered with ``HX-Redirect``, a plain
    form post with a redirect.
    """
    owner = store.Owner.of(request.user, request.session)
    question = _question(request)
    try:
        fork = store.conversation_fork(
            owner=owner, conversation_id=conversation_id, question_id=question or 0
        )
    except store.BranchRefused as exc:
        if str(exc) == NOT_A_QUESTION:
            raise Http404("No such question in this conversation.") from None
        if not request.htmx:
            return HttpResponse(str(exc), status=409, content_type="text/plain; charset=utf-8")
        return _refused(str(exc), 409)
    url = reverse("chat:conversation", kwargs={"conversation_id": fork.pk})
    if request.htmx:
        return HttpResponseClientRedirect(url)
    return redirect(url)
