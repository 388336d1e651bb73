"""HTML fragments sent over the websocket, rendered from rows with the page's templates.

The htmx websocket extension swaps every top-level element it receives out-of-band:
by its id (``hx-swap-oob="true"``, the default) or with an explicit strategy such as
``beforeend:#run-7-steps``. A page reload renders the same templates from the same rows.

Every function here is sync and reads only rows loaded by the :mod:`chat.store` call it
renders (``chat.store.rows.runs_loaded``); async code calls them inside the same
``database_sync_to_async`` call that loaded the rows (:mod:`chat.recorder`,
:mod:`chat.live`, :mod:`chat.consumers`). tests/chat/test_fragments.py renders each with
database access forbidden.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.conf import settings as conf
from django.template.loader import render_to_string
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from chat import store
from chat.models import AgentRun, AgentStep, Conversation, QueuedMessage, RunStatus
from chat.store.usage import conversation_usage as summed_usage
from chat.templatetags.chat_tags import streamed_html


def _render(template_name: str, context: dict[str, object]) -> str:
    """Return the template rendered, without the whitespace around its one element.

    Templates keep one tag per line; the line breaks around a fragment's element would
    otherwise travel as text nodes into every swap.
    """
    return render_to_string(template_name, context).strip()


def run_started(run: AgentRun) -> str:
    """Return the user's message and the run's (empty) container, appended to the list.

    The conversation's title (set from its first message) is refreshed in the header and
    the sidebar too, and the strategy picker becomes a badge: the strategy is fixed now.
    """
    conversation = run.conversation
    inner = _render("chat/_run.html", {"run": run, "steps": []})
    title = _render("chat/_title.html", {"conversation": conversation, "oob": True})
    link = _render(
        "chat/_conversation_link.html",
        {"item": conversation, "active": conversation.pk, "oob": True},
    )
    settings = _render(
        "chat/_settings.html",
        {"conversation": conversation, "settings_editable": False, "oob": True},
    )
    wrapper = '<div hx-swap-oob="beforeend:#messages">'
    return f"{wrapper}{inner}</div>{title}{link}{settings}"


def branch_shown(conversation: Conversation, *, oob: bool = True) -> str:
    """Return the branch ``conversation`` shows now, whole, as the message list's content
    (sync: loads it, :func:`chat.store.runs_window`).

    Sent to every tab after a retry, regenerate or edit starts a run and after a switch
    of branch: the list holds what a reload shows, the earlier branch's exchanges gone
    from it (they stay, behind the question's "< 1 / 2 >" switcher). ``oob=False``
    returns the list's content alone, for an htmx request that swaps it in itself.
    """
    window = store.runs_window(conversation_id=conversation.pk, exchanges=conf.CHAT_PAGE_EXCHANGES)
    context = {"conversation": conversation, "runs": window.runs, "earlier": window.earlier}
    inner = _render("chat/_earlier.html", context)
    return list_replaced(inner) if oob else inner


def list_replaced(inner: str) -> str:
    """Return ``inner`` (rendered by :func:`branch_shown`) as the message list's new
    content, swapped out of band.

    Its first element is a marker with no id: the page's idempotent appends
    (``htmx:oobBeforeSwap`` in static/js/chat.js) judge a fragment by its first element,
    and an ended run already shown there would cancel the whole list's swap.
    """
    marker = "<template data-branch-list></template>"
    return f'<div hx-swap-oob="innerHTML:#messages">{marker}{inner}</div>'


def conversation_renamed(conversation: Conversation) -> str:
    """Return a conversation's new title for its open pages: the header and its list link.

    Sent to the conversation's group, so every tab showing it follows a rename; the tab
    title follows the header (static/js/sidebar.js).
    """
    title = _render("chat/_title.html", {"conversation": conversation, "oob": True})
    link = _render(
        "chat/_conversation_link.html",
        {"item": conversation, "active": conversation.pk, "oob": True},
    )
    return title + link


def run_caught_up(run: AgentRun) -> str:
    """Return a stored run whole, for a page that connected after it started.

    Sent as an append to the message list; the page's script swaps it in place of the
    element with the same id when there is one (see ``static/js/chat.js``).
    """
    inner = _render("chat/_run.html", {"run": run, "steps": list(run.steps.all())})
    return f'<div hx-swap-oob="beforeend:#messages">{inner}</div>'


def step_appended(step: AgentStep) -> str:
    """Return a new step (model turn or tool card) appended to its run's steps."""
    inner = _render("chat/_step.html", {"step": step})
    return f'<div hx-swap-oob="beforeend:#run-{step.run_id}-steps">{inner}</div>'


def step_replaced(step: AgentStep) -> str:
    """Return the step re-rendered, replacing its element by id."""
    return _render("chat/_step.html", {"step": step, "oob": True})


def text_delta(step_id: int, text: str, offset: int | None = None, *, target: str = "text") -> str:
    """Return streamed model text (escaped) appended to the model turn's text element.

    ``target`` is the element: ``text`` (the reply) or ``reasoning`` (its folded
    thinking). ``offset`` is where the text starts (UTF-16 code units); the page drops a
    delta that does not start where its element's text ends and waits for the next
    whole-text snapshot.

    Written with :func:`chat.templatetags.chat_tags.streamed_html` (escaped, its CRs as
    references the browser's parser keeps) rather than ``format_html``: it runs for every
    streamed token. Raises ``ValueError`` for another ``target``.
    """
    if target not in ("text", "reasoning"):
        raise ValueError(f"not a model turn's streamed element: {target!r}")
    step_id, text = int(step_id), streamed_html(text)
    if offset is None:
        return mark_safe(f'<div hx-swap-oob="beforeend:#step-{step_id}-{target}">{text}</div>')
    offset = int(offset)
    return mark_safe(  # Safe: the numbers are ints, the text was escaped just above.
        f'<div hx-swap-oob="beforeend:#step-{step_id}-{target}" data-offset="{offset}">{text}</div>'
    )


def text_replaced(step_id: int, text: str) -> str:
    """Return a model turn's whole text so far (escaped), replacing its text element."""
    return format_html(
        '<div class="turn-text streaming" id="step-{}-text" hx-swap-oob="true">{}</div>',
        step_id,
        streamed_html(text),
    )


def reasoning_replaced(step_id: int, reasoning: str) -> str:
    """Return a model turn's whole reasoning so far (escaped), replacing its element.

    Only the text inside the folded "thinking" is replaced, so a reader who opened it
    keeps it open.
    """
    return format_html(
        '<div class="reasoning-text" id="step-{}-reasoning" hx-swap-oob="true">{}</div>',
        step_id,
        streamed_html(reasoning),
    )


def run_status(run: AgentRun) -> str:
    """Return the run's status line, replacing it by id, and clear any error notice."""
    return _render("chat/_run_status.html", {"run": run, "oob": True}) + error("")


def run_resumed(run: AgentRun) -> str:
    """Return the status line of ``run`` going on after the decisions it waited for,
    replacing it by id (every page's said it waits, and its composer offered Send)."""
    return _render("chat/_run_status.html", {"run": run, "oob": True})


def run_ended(run: AgentRun) -> str:
    """Return what a page needs once ``run`` has ended, and clear any error notice.

    A run that succeeded has had every step's outcome sent: its status line is enough,
    unless a ``return_direct`` tool answered (the answer is drawn after the steps).
    One that was stopped, interrupted or failed may have steps it closed as it ended (a
    tool card left running, a half-streamed turn, saved whole): the run is sent again
    whole, replacing it by id. Either way the answer's thumbs come with it
    (:func:`feedback_replaced`), and the header's summed usage of the conversation
    follows (:func:`conversation_usage`).
    """
    # A return_direct tool's answer is drawn after the steps, not in the status line.
    whole = run.status != RunStatus.SUCCEEDED or bool(run.answered_by_tool)
    ended = run_caught_up(run) + error("") if whole else run_status(run) + _feedback(run)
    return ended + conversation_usage(run)


def conversation_usage(run: AgentRun) -> str:
    """Return the header's summed usage of ``run``'s conversation, replacing it by id.

    ``""`` unless the store set ``run.conversation_usage`` (as a run ends).
    """
    if run.conversation_usage is None:
        return ""
    context = {"usage": run.conversation_usage, "oob": True}
    return _render("chat/_conversation_usage.html", context)


def _feedback(run: AgentRun) -> str:
    """Return the run's feedback element (its thumbs, or an empty placeholder when it takes
    none), replacing it by id."""
    offered = store.feedback_offered(run)
    return _render("chat/_feedback.html", {"run": run, "offered": offered, "oob": True})


def feedback_replaced(run: AgentRun) -> str:
    """Return the answer's feedback as stored now (thumbs pressed, comment), replacing it
    by id in every tab (a refusal's line under the thumbs goes with it). ``run`` takes
    feedback (:func:`chat.store.feedback_offered`) and has it loaded (``run.feedback``, or
    known to have none): :func:`chat.store.feedback_give` and ``feedback_remove`` return
    it so."""
    return _render("chat/_feedback.html", {"run": run, "offered": True, "oob": True})


# What became of a frame, in the data-outcome of the element that says so: the page reads
# it as htmx swaps the element in (static/js/chat.js).
MESSAGE_ACCEPTED = "message-accepted"
MESSAGE_REFUSED = "message-refused"
DECISION_REFUSED = "decision-refused"
FEEDBACK_REFUSED = "feedback-refused"


def queue_replaced(queued: list[QueuedMessage]) -> str:
    """Return the conversation's queued messages (``#queued-messages``), in the order they
    will be sent, each with its Remove and "Stop and send now"; hidden when empty."""
    return _render("chat/_queue.html", {"queued": queued, "oob": True})


def message_accepted(client_id: str = "") -> str:
    """Return the cleared notice that tells the page a message was accepted: the tab
    that sent it, the one whose id for it is ``client_id``, empties its composer (sent
    beside :func:`run_started`, to every tab: another tab's message must not empty a
    composer whose own message may yet be refused)."""
    context = {"message": "", "outcome": MESSAGE_ACCEPTED, "client_id": client_id}
    return _render("chat/_error.html", context)


def message_refused(message: str) -> str:
    """Return the notice saying why a frame (a message, or one the chat cannot read) was
    refused; the page keeps the composer's text for another try."""
    return _render("chat/_error.html", {"message": message, "outcome": MESSAGE_REFUSED})


def decision_refused(step_id: int, message: str) -> str:
    """Return why a decision on the held call of step ``step_id`` was refused: the page's
    notice, and the line beside the card's buttons (a card no longer on the page ignores
    it), whose outcome makes the page's sent card usable again."""
    line = format_html(
        '<div class="approval-error" id="step-{}-approval-error" role="alert" '
        'data-outcome="{}" hx-swap-oob="true">{}</div>', step_id, DECISION_REFUSED, message,
    )  # fmt: skip
    return error(message) + line


def feedback_refused(run_id: int, message: str) -> str:
    """Return why feedback on the answer of run ``run_id`` was not saved: the page's notice,
    and the line under the answer's thumbs (an answer no longer on the page ignores it).

    The feedback element itself is not replaced, so a comment typed stays in its box for
    another try."""
    line = format_html(
        '<div class="feedback-error" id="run-{}-feedback-error" role="alert" '
        'data-outcome="{}" hx-swap-oob="true">{}</div>', run_id, FEEDBACK_REFUSED, message,
    )  # fmt: skip
    return error(message) + line


def error(message: str) -> str:
    """Return a notice for the chat page (escaped), or clear it with ``""``."""
    return _render("chat/_error.html", {"message": message})


def runs_caught_up(
    *, conversation_id: int, shown_going: Sequence[int] = (), last_shown: int | None = None
) -> list[str]:
    """Load and render the runs a page that just connected may have missed (sync).

    The running runs, the latest one and those the page shows as going
    (:func:`chat.store.runs_to_catch_up`), whole, then the header's summed usage (a run
    may have ended while the page was away). When the page names the newest run it shows,
    ``last_shown``, and the branch's latest is another (a take made meanwhile in another
    tab, or queued messages sent one after the other), appending would not make what a
    reload shows: the list is sent whole instead (:func:`branch_shown`).
    """
    latest = store.latest_run_shown(conversation_id=conversation_id)
    if latest is None:
        return []
    usage = summed_usage(conversation_id=conversation_id)
    header = _render("chat/_conversation_usage.html", {"usage": usage, "oob": True})
    if last_shown is not None and latest != last_shown:
        conversation = Conversation.objects.get(pk=conversation_id)
        return [branch_shown(conversation) + header]
    runs = store.runs_to_catch_up(conversation_id=conversation_id, shown_going=shown_going)
    frames = [run_caught_up(run) for run in runs]
    frames[-1] += header  # one frame per run, as before: the header goes with the last
    return frames


def timeline_replaced(run: AgentRun, steps: list[AgentStep]) -> str:
    """Return the run's timeline redrawn from ``steps`` as of now: its summary line and
    its bars, each replacing its element by id, so a reader who opened the timeline
    keeps it open (``chat/_timeline.html``; :mod:`chat.timeline`)."""
    from django.utils import timezone

    from chat.templatetags.timeline_tags import timeline_body
    from chat.timeline import timeline_of

    timeline = timeline_of(run, steps, now=timezone.now())
    context = {"timeline": timeline, "oob": True}
    return _render("chat/_timeline_summary.html", context) + timeline_body(timeline, oob=True)
