"""The chat socket's frames, parsed once into types, and the refusals they meet.

The page sends JSON (the htmx websocket extension's ``ws-send`` posts its form, with a
``HEADERS`` key): the composer's ``{"content": "..."}``, the Stop button's
``{"type": "cancel", "run": ID}``, a held call's card's ``{"type": "approval", ...}``, an
answer's thumbs and comment, ``{"type": "feedback", ...}``, an exchange's Retry,
Regenerate and Edit, ``{"type": "retry" | "regenerate" | "edit", ...}``, and a queued
message's Remove and "Send now", ``{"type": "unqueue" | "steer", "queued": ID}``.
:func:`parse_frame` turns each into a :data:`Frame` or raises; the consumer
(:class:`chat.consumers.ChatConsumer`) dispatches frames with one ``match`` and turns
refusals into the notice the page shows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any
from urllib.parse import parse_qs

from chat.store.approvals import NOT_A_HELD_CALL
from chat.store.feedback import NOT_A_RUN
from chat.validation import MessageError, clean_message

BINARY_FRAME = "Binary frames are not supported: send a JSON text frame."
NOT_JSON = "That frame was not valid JSON."
NOT_OBJECT = "Expected a JSON object with a 'content' field."
UNKNOWN_TYPE = (
    "Unknown message type {kind!r}: the types are 'message', 'cancel', 'approval', "
    "'feedback', 'retry', 'regenerate', 'edit', 'unqueue' and 'steer'."
)
BAD_CLIENT_ID = "A message's 'client_id' must be 1 to 64 letters, digits, '-' or '_'."
BAD_QUEUED = "'unqueue' and 'steer' need 'queued': the queued message's id."
BAD_STOP_RUN = "A stop's 'run' must be the id of the run to stop. Nothing was stopped."
BAD_DECISION = (
    "An approval needs 'step' (the held call's step id), 'decision' ('approve' or "
    "'deny'), and optionally 'arguments' (JSON text), 'reason' (text) and 'always' (true)."
)
BAD_FEEDBACK = (
    "Feedback needs 'run' (the answer's run id), and 'rating' ('up', 'down' or 'none') or "
    "'comment' (text), or both."
)
NO_CONTENT = "The message needs a text 'content' field."
TOO_DEEP = "That frame is nested too deeply to read."
# Step ids are 64-bit signed integers: a larger one makes the database driver raise.
MAX_STEP_ID = 2**63
BAD_BRANCH = (
    "A {kind} needs 'run' (the run's id){content}, and optionally 'model' and 'strategy' "
    "(text). Nothing was started."
)
NOT_A_BRANCHED_RUN = "No such run in this conversation. Nothing was started."
BRANCH_KINDS = ("retry", "regenerate", "edit")
CLIENT_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
CANCEL = "cancel"
UNQUEUE = "unqueue"
STEER = "steer"
APPROVAL = "approval"
FEEDBACK = "feedback"
# The most run ids a reconnecting page names in its socket's ``going`` parameter.
MAX_GOING = 20


class FrameRefused(Exception):
    """A frame the chat does not act on: a message it refuses, or a frame it cannot read.

    The text says why, for the user. ``of_message``: a refused message (or a frame of no
    known type), of which the page is told (:func:`chat.fragments.message_refused`), so
    the composer keeps its text for another try; False for a frame of another type
    (a take, a Stop, a decision...), which must not touch the message the composer sent.
    """

    def __init__(self, message: str, *, of_message: bool = True) -> None:
        super().__init__(message)
        self.of_message = of_message


class QueueFrameRefused(Exception):
    """A Remove or "Send now" on a queued message that is not done: the text says why
    (not this conversation's, sent or removed already); the page shows it as a notice."""


class DecisionRefused(Exception):
    """A decision on the held call of step ``step_id`` that is not taken; the text says
    why, in the page's notice and beside the card's buttons, which the page makes usable
    again (:func:`chat.fragments.decision_refused`)."""

    def __init__(self, message: str, *, step_id: int) -> None:
        super().__init__(message)
        self.step_id = step_id


class FeedbackFrameRefused(Exception):
    """Feedback on the answer of run ``run_id`` that is not saved; the text says why, in
    the page's notice and beside the answer's thumbs, and the comment typed stays where it
    is (:func:`chat.fragments.feedback_refused`)."""

    def __init__(self, message: str, *, run_id: int) -> None:
        super().__init__(message)
        self.run_id = run_id


@dataclass(frozen=True)
class MessageFrame:
    """``{"content": "...", "client_id": "..."}``: the user's message, cleaned
    (:func:`chat.validation.clean_message`: a new run's input, or queued behind the run
    going).

    ``client_id`` is the page's id for this message ("" when not sent): a copy of the
    frame sent again (a page that reconnected) is acknowledged, not stored twice.
    """

    content: str
    client_id: str = ""


@dataclass(frozen=True)
class StopFrame:
    """``{"type": "cancel", "run": ID}``: stop the conversation's run going on; ``run``
    (optional) is the one the page showed going, and only it is stopped.

    Its own type, not a string: a message whose text is "cancel" must not stop anything.
    """

    run_id: int | None = None


@dataclass(frozen=True)
class DecisionFrame:
    """``{"type": "approval", ...}``: a decision on the held call of step ``step_id``.

    ``decision`` is "approve" or "deny"; ``arguments`` the card's edited arguments (JSON
    text, "" for none), ``reason`` a denial's and ``always`` "allow the tool for the rest
    of the chat", all as sent: :class:`chat.forms.DecisionForm` validates them.
    """

    step_id: int
    decision: str
    arguments: str = ""
    reason: str = ""
    always: bool = False

    def form_data(self) -> dict[str, Any]:
        """Return the decision's fields as :class:`chat.forms.DecisionForm` reads them."""
        return {"decision": self.decision, "arguments": self.arguments,
                "reason": self.reason, "always": self.always}  # fmt: skip


@dataclass(frozen=True)
class FeedbackFrame:
    """``{"type": "feedback", ...}``: the owner's rating and/or comment on run ``run_id``'s
    answer.

    ``rating`` is as sent ("up", "down", "none" to take the feedback back; None when left
    out), ``comment`` the whole comment (None when left out): :class:`chat.forms.FeedbackForm`
    validates them.
    """

    run_id: int
    rating: str | None = None
    comment: str | None = None

    def form_data(self) -> dict[str, Any]:
        """Return the fields sent, as :class:`chat.forms.FeedbackForm` reads them (a field
        left out stays as stored)."""
        data = {"rating": self.rating, "comment": self.comment}
        return {name: value for name, value in data.items() if value is not None}


@dataclass(frozen=True)
class BranchFrame:
    """``{"type": "retry" | "regenerate" | "edit", "run": ID, ...}``: another take of run
    ``run_id``'s question (docs/branches.md).

    ``content`` is an edit's new question (cleaned as a message is; "" otherwise);
    ``model`` and ``strategy`` a regenerate's picks ("" : the conversation's), as sent:
    :func:`chat.branches.create_branch` checks them against what the agent allows.
    """

    kind: str
    run_id: int
    content: str = ""
    model: str = ""
    strategy: str = ""


@dataclass(frozen=True)
class UnqueueFrame:
    """``{"type": "unqueue", "queued": ID}``: remove queued message ``queued_id``."""

    queued_id: int


@dataclass(frozen=True)
class SteerFrame:
    """``{"type": "steer", "queued": ID, "run": ID}``: stop the run going (only ``run``,
    the one the page showed going, when sent) and send queued message ``queued_id`` as
    soon as it has ended (it goes first in the queue)."""

    queued_id: int
    run_id: int | None = None


Frame = (
    MessageFrame
    | StopFrame
    | DecisionFrame
    | FeedbackFrame
    | BranchFrame
    | UnqueueFrame
    | SteerFrame
)


def parse_frame(text_data: str | None, bytes_data: bytes | None, *, max_chars: int) -> Frame:
    """Return the :data:`Frame` a websocket frame holds.

    Raises :class:`FrameRefused` for binary, non-JSON or too deeply nested frames,
    non-objects, unknown types, missing, empty (or only invisible characters) or over-long
    (more than ``max_chars`` characters) content, and for content no database can store
    (a NUL character, an unpaired UTF-16 surrogate); see :func:`parse_decision` for
    decisions.
    """
    if text_data is None:
        raise FrameRefused(BINARY_FRAME)
    try:
        payload: Any = json.loads(text_data)
    except ValueError:
        raise FrameRefused(NOT_JSON) from None
    except RecursionError:
        raise FrameRefused(TOO_DEEP) from None
    if not isinstance(payload, dict):
        raise FrameRefused(NOT_OBJECT)
    kind = payload.get("type", "message")
    if kind == CANCEL:
        return StopFrame(_run_shown_going(payload, partial(FrameRefused, of_message=False)))
    if kind == APPROVAL:
        return parse_decision(payload)
    if kind == FEEDBACK:
        return parse_feedback(payload)
    if kind in BRANCH_KINDS:
        return parse_branch(payload, kind, max_chars=max_chars)
    if kind in (UNQUEUE, STEER):
        return parse_queued(payload, steer=kind == STEER)
    if kind != "message":
        raise FrameRefused(UNKNOWN_TYPE.format(kind=str(kind)[:40]))
    content = payload.get("content")
    if not isinstance(content, str):
        raise FrameRefused(NO_CONTENT)
    client_id = payload.get("client_id", "")
    if not isinstance(client_id, str) or (client_id and not CLIENT_ID.fullmatch(client_id)):
        raise FrameRefused(BAD_CLIENT_ID)
    try:
        return MessageFrame(clean_message(content, max_chars=max_chars), client_id=client_id)
    except MessageError as exc:
        raise FrameRefused(str(exc)) from None


def parse_going(query_string: bytes) -> tuple[int, ...]:
    """Return the run ids of the socket URL's ``going`` parameter (``?going=3,7``): the
    runs the reconnecting page still shows running or waiting (static/js/chat.js).

    A hint, never an order: ids that are not row ids are left out, and all but the newest
    :data:`MAX_GOING`; which of them belong to the conversation is the catch-up's to
    say (:func:`chat.store.runs_to_catch_up`). Why: a run that ended while the page
    was away, with the queue's next run started since, is neither going nor the latest.
    """
    values = parse_qs(query_string.decode("latin-1")).get("going", [])
    ids = (_row_id(part) for value in values for part in value.split(","))
    going = sorted({run for run in ids if run is not None and 0 < run < MAX_STEP_ID})
    return tuple(going[-MAX_GOING:])  # the newest, as the page sends them


def parse_last(query_string: bytes) -> int | None:
    """Return the run id of the socket URL's ``last`` parameter (``?last=12``): the newest
    run the (re)connecting page shows, 0 for none; None when it is missing or not a row id
    (a hint, as :func:`parse_going`'s)."""
    values = parse_qs(query_string.decode("latin-1")).get("last", [])
    last = _row_id(values[-1]) if values else None
    return last if last is not None and 0 <= last < MAX_STEP_ID else None


def parse_queued(payload: dict[str, Any], *, steer: bool) -> UnqueueFrame | SteerFrame:
    """Return the frame of a queued message's Remove (``unqueue``) or "Send now"
    (``steer``); a form sends ``queued`` as text.

    Raises :class:`QueueFrameRefused` without a usable id; whether it is queued in this
    conversation is the store's to say (:class:`chat.store.NotQueued`).
    """
    queued = _row_id(payload.get("queued"))
    if queued is None or not 0 < queued < MAX_STEP_ID:
        raise QueueFrameRefused(BAD_QUEUED)
    if not steer:
        return UnqueueFrame(queued)
    return SteerFrame(queued, _run_shown_going(payload, QueueFrameRefused))


def _run_shown_going(payload: dict[str, Any], refused: Callable[[str], Exception]) -> int | None:
    """Return the optional ``run`` of a Stop or "Stop and send now" (None if absent).

    Raises ``refused(BAD_STOP_RUN)`` (an exception of the frame's kind) for one that is
    not a row id.
    """
    if payload.get("run") in (None, ""):
        return None
    run = _row_id(payload.get("run"))
    if run is None or not 0 < run < MAX_STEP_ID:
        raise refused(BAD_STOP_RUN)
    return run


def parse_decision(payload: dict[str, Any]) -> DecisionFrame:
    """Return the decision of an ``approval`` frame (a form sends ``step`` as text,
    ``always`` as "on").

    Raises :class:`FrameRefused` without a usable step id or decision, and
    :class:`DecisionRefused` for ``arguments`` or ``reason`` that are not text. What they
    say is checked by :class:`chat.forms.DecisionForm` when the decision is taken.
    """
    step, decision = _row_id(payload.get("step")), payload.get("decision")
    if step is None or decision not in ("approve", "deny"):
        raise FrameRefused(BAD_DECISION, of_message=False)
    if not 0 < step < MAX_STEP_ID:  # a database's integer overflows past it (a crash)
        raise FrameRefused(NOT_A_HELD_CALL, of_message=False)
    arguments, reason = payload.get("arguments"), payload.get("reason", "")
    arguments = "" if arguments is None else arguments
    if not isinstance(arguments, str) or not isinstance(reason, str):
        raise DecisionRefused(BAD_DECISION, step_id=step)
    always = payload.get("always") in (True, "on", "true", "1")
    return DecisionFrame(step, decision, arguments=arguments, reason=reason, always=always)


def _row_id(value: Any) -> int | None:
    """Return a row id sent as a number or as digits (a form sends text), None if it is
    neither; an id too large for any row is :data:`MAX_STEP_ID`."""
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        # isdigit() alone is true of "²", which int() refuses; past 19 digits no row id
        # is that large (and int() refuses 4,300 digits or more with a ValueError).
        return int(value) if len(value.strip()) <= 19 else MAX_STEP_ID
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    return value


def parse_feedback(payload: dict[str, Any]) -> FeedbackFrame:
    """Return the feedback of a ``feedback`` frame (a form sends ``run`` as text).

    Raises :class:`FrameRefused` without a usable run id, and
    :class:`FeedbackFrameRefused` for a ``rating`` or ``comment`` that is not text, or
    neither of them. What they say is checked by :class:`chat.forms.FeedbackForm`.
    """
    run = _row_id(payload.get("run"))
    if run is None:
        raise FrameRefused(BAD_FEEDBACK, of_message=False)
    if not 0 < run < MAX_STEP_ID:  # a database's integer overflows past it (a crash)
        raise FrameRefused(NOT_A_RUN, of_message=False)
    rating, comment = payload.get("rating"), payload.get("comment")
    fields = (rating, comment)
    if all(field is None for field in fields) or any(
        field is not None and not isinstance(field, str) for field in fields
    ):
        raise FeedbackFrameRefused(BAD_FEEDBACK, run_id=run)
    return FeedbackFrame(run, rating=rating, comment=comment)


def parse_branch(payload: dict[str, Any], kind: str, *, max_chars: int) -> BranchFrame:
    """Return the retry, regenerate or edit a frame asks for (a form sends ``run`` as
    text; an empty ``model`` or ``strategy`` means the conversation's).

    Raises :class:`FrameRefused` without a usable run id, for ``model`` or ``strategy``
    that are not text, and for an edit without content a message could have (see
    :func:`parse_frame`).
    """
    run = _row_id(payload.get("run"))
    model, strategy = payload.get("model") or "", payload.get("strategy") or ""
    needs = " and 'content' (the edited question)" if kind == "edit" else ""
    if run is None or not isinstance(model, str) or not isinstance(strategy, str):
        raise FrameRefused(BAD_BRANCH.format(kind=kind, content=needs), of_message=False)
    if not 0 < run < MAX_STEP_ID:  # a database's integer overflows past it (a crash)
        raise FrameRefused(NOT_A_BRANCHED_RUN, of_message=False)
    content = ""
    if kind == "edit":
        raw = payload.get("content")
        if not isinstance(raw, str):
            raise FrameRefused(BAD_BRANCH.format(kind=kind, content=needs), of_message=False)
        try:
            content = clean_message(raw, max_chars=max_chars)
        except MessageError as exc:
            raise FrameRefused(str(exc), of_message=False) from None
    return BranchFrame(kind, run, content=content, model=model[:100], strategy=strategy[:100])
