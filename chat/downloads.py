"""A user's own conversation as a file: its runs in any format of the table
(:data:`chat.traces.formats.FORMATS`), for its owner only."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.views.decorators.http import require_GET

from chat import store
from chat.traces.formats import FORMATS, UnknownFormat, download_response, find_format


@require_GET
def conversation_download(
    request: HttpRequest, conversation_id: int, format_name: str
) -> HttpResponse:
    """Download the runs of a conversation of the requester's, in ``format_name``.

    The same file the admin gives for those runs (steps, approvals and feedback; every
    string through the redaction policy), streamed, named
    ``conversation-<id>-<UTC stamp>.<extension>``; ``?bom=1`` gives the CSV's Excel
    variant. 404 unless the conversation is the requester's (a user's, or the guest
    session's) and still in their list, or for a format not in the table; 400 for
    ``bom`` with a format other than CSV.
    """
    if format_name not in FORMATS:
        raise Http404("No such format.")
    owner = store.Owner.of(request.user, request.session)
    conversation = store.conversation_get(owner=owner, conversation_id=conversation_id)
    if conversation is None:
        raise Http404("No such conversation.")
    try:
        fmt = find_format(format_name, bom=request.GET.get("bom") == "1")
    except UnknownFormat as exc:
        return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
    return download_response(
        conversation.runs.all(), fmt, request=request, prefix=f"conversation-{conversation.pk}"
    )
