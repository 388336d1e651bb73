"""The chat's comparison of two runs: the "Compare" menu of a run, and the page that shows
two runs of a conversation step by step (:mod:`chat.compare`). Owner only: 404 otherwise.
"""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import render
from django.views.decorators.http import require_GET

from chat import store
from chat.compare import compare_runs, run_side
from chat.models import AgentRun, Conversation
from chat.store.comparisons import run_other_takes, runs_for_comparison

SAME_RUN = "Pick two different runs to compare."


def _yours_or_404(request: HttpRequest, conversation_id: int) -> Conversation:
    """Return the conversation if it is the requester's; raise ``Http404`` otherwise."""
    owner = store.Owner.of(request.user, request.session)
    conversation = store.conversation_get(owner=owner, conversation_id=conversation_id)
    if conversation is None:
        raise Http404("No such conversation.")
    return conversation


@require_GET
def run_compare_menu(request: HttpRequest, conversation_id: int, run_id: int) -> HttpResponse:
    """Return the other runs of a run's question, each a link to the comparison (a
    fragment the run's "Compare" menu loads when it opens), or a line saying there is none
    yet. 404 unless the conversation is yours and the run one of its runs."""
    conversation = _yours_or_404(request, conversation_id)
    run = (
        AgentRun.objects.filter(pk=run_id, conversation_id=conversation.pk)
        .select_related("user_message")
        .first()
    )
    if run is None:
        raise Http404("No such run in this conversation.")
    context = {"run": run, "takes": run_other_takes(run=run), "conversation": conversation}
    return render(request, "chat/_compare_choices.html", context)


@require_GET
def run_compare(
    request: HttpRequest, conversation_id: int, left_id: int, right_id: int
) -> HttpResponse:
    """Render two runs of a conversation compared step by step, with the other runs of the
    first's question to switch to. 404 unless the conversation is yours and both runs are
    its runs; 400 for a run compared with itself."""
    conversation = _yours_or_404(request, conversation_id)
    if left_id == right_id:
        return HttpResponseBadRequest(SAME_RUN, content_type="text/plain; charset=utf-8")
    try:
        left, right = runs_for_comparison(
            run_ids=(left_id, right_id), conversation_id=conversation.pk
        )
    except AgentRun.DoesNotExist:
        raise Http404("No such run in this conversation.") from None
    comparison = compare_runs(
        run_side(left, left.compared_steps), run_side(right, right.compared_steps)
    )
    context = {
        "conversation": conversation,
        "comparison": comparison,
        "run": left,
        "other": right,
        "takes": run_other_takes(run=left),
    }
    return render(request, "chat/compare.html", context)
