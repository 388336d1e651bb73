"""The chat websocket: one socket per open conversation page.

Protocol (the htmx websocket extension's): the browser sends the composer form as JSON,
``{"content": "...", "HEADERS": {...}}`` (an explicit ``"type": "message"`` is accepted
too), the Stop button's form as ``{"type": "cancel"}``, a held call's card as
``{"type": "approval", ...}``, an answer's thumbs and comment as
``{"type": "feedback", ...}``, an exchange's Retry, Regenerate and Edit as
``{"type": "retry" | "regenerate" | "edit", ...}`` and a queued message's Remove and
"Stop and send now" as ``{"type": "unqueue" | "steer", "queued": ID}``; each frame is
parsed once into a :data:`chat.frames.Frame`.
The server sends HTML fragments that htmx swaps in by id. A refused frame is raised
(:class:`chat.frames.FrameRefused`, :class:`chat.frames.DecisionRefused`,
:class:`chat.frames.FeedbackFrameRefused`, :class:`MessageRefused`) and answered with a
notice whose ``data-outcome`` tells the page what became of it (:mod:`chat.fragments`);
the socket stays open.

Close codes: 4404, no such conversation for you; 4410, its owner deleted the conversation
while the socket was open (in another tab or window); 4401, the session the socket was opened
with has ended (logout, or login changed it), at connect or later; 4429, the socket kept
sending far faster than a person types (see :data:`FRAME_RATE`); 4403 (from
:mod:`chat.security`, before this consumer), an Origin that is not this site. Every one
is logged on ``chat.sockets`` with its reason, and the page says what it means
(static/js/chat.js, ``FINAL_CLOSES``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, assert_never

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from agents.events import utcnow
from chat import feedback, fragments, owner, queued, store
from chat.approvals import decide
from chat.branches import create_branch
from chat.catalog import code_tools_for
from chat.frames import (
    BranchFrame,
    DecisionFrame,
    DecisionRefused,
    FeedbackFrame,
    FeedbackFrameRefused,
    Frame,
    FrameRefused,
    MessageFrame,
    QueueFrameRefused,
    SteerFrame,
    StopFrame,
    UnqueueFrame,
    parse_frame,
    parse_going,
    parse_last,
)
from chat.live import (
    Addressed,
    GroupPublisher,
    group_name,
    interrupt_stale_runs,
    publish_each,
)
from chat.models import BranchKind
from chat.owner import StopOutcome, decisions_taken, request_stop
from chat.runs import finish_if_running
from chat.security import log_refusal, session_ended

logger = logging.getLogger(__name__)

CLOSE_NOT_FOUND = 4404
CLOSE_DELETED = 4410
CLOSE_SESSION_ENDED = 4401
CLOSE_FLOOD = 4429
CLOSE_ABNORMAL = 1006  # RFC 6455: the connection went without a close frame
# Frames a socket may send: a burst of FRAME_BURST, then FRAME_RATE a second. Past that,
# frames are dropped with a notice (at most one a second); a socket that keeps going
# until FLOOD_CLOSE_AFTER frames were dropped is closed with CLOSE_FLOOD.
FRAME_BURST = 20
FRAME_RATE = 5.0
FLOOD_CLOSE_AFTER = 200
# How often (seconds) a socket that only listens re-checks that its session still exists.
SESSION_RECHECK_S = 5.0
# A "newest run shown" no run has: the catch-up then sends the whole list.
WHOLE_LIST = 0
# Seconds between a socket's joins of its conversation's group: the layers end a
# membership after their group_expiry (a day), also for a socket that reads.
GROUP_REJOIN_S = 3600.0

RUN_WAITING = (
    "The agent is waiting for your decision on a tool call above: approve or deny it "
    "(or press Stop) before sending another message."
)
NOTHING_TO_STOP = "Nothing to stop: the agent is not working on anything in this chat."
STOPPED_NOTHING_ENDED = "That run had already ended when the Stop arrived: nothing was stopped."
RUN_GOING = "The agent is still working on your last message. Wait for it to finish."
BRANCH_WHILE_GOING = (
    "The agent is still working on this chat: wait for it to finish (or press Stop) before "
    "running an exchange again. Nothing was started."
)
RATE_LIMITED = (
    "You have started {limit} runs in the last minute, the most allowed. Your message was "
    "not sent: try again in {seconds} s."
)
FLOODED = "Too many messages at once: some were ignored. Slow down."
# Reasons written to the log (chat.sockets) when a socket is closed.
REFUSED_NOT_FOUND = "conversation {conversation_id} not found for {who}"
REFUSED_SESSION_GONE = (
    "the session cookie's session no longer exists (logged out, expired, or replaced at login)"
)
REFUSED_SESSION_ENDED = "the session ended while the socket was open (logout, or a new login)"
REFUSED_FLOOD = "{dropped} frames dropped for sending too fast"
REFUSED_NO_ROUTE = "no websocket route for this path"
REFUSED_DELETED = "conversation {conversation_id} was deleted by its owner"


class MessageRefused(FrameRefused):
    """A message refused after the conversation's stale runs were swept: ``interrupted``
    are the sweep's fragments (:func:`chat.live.interrupt_stale_runs`), which the pages
    need all the same."""

    def __init__(
        self, message: str, *, interrupted: list[Addressed], of_message: bool = True
    ) -> None:
        super().__init__(message, of_message=of_message)
        self.interrupted = interrupted


def _find_conversation(user: Any, session: Any, conversation_id: int) -> int | None:
    """Return the conversation's id if the scope's user (or guest) owns it, else None.

    Sync, one ORM call for the user (loaded here on first read:
    :class:`chat.security.LazyUserMiddleware`), the owner and the conversation.
    """
    owner = store.Owner.of(user, session)
    conversation = store.conversation_get(owner=owner, conversation_id=conversation_id)
    return None if conversation is None else conversation.pk


# What parse_frame raises for a frame it refuses (each said in its own place).
PARSE_REFUSALS = (FrameRefused, DecisionRefused, FeedbackFrameRefused, QueueFrameRefused)


class SessionEnded(Exception):
    """The socket's session ended (:func:`chat.security.session_ended`), found by the
    check made in the same database call as what the frame asked."""


@dataclass(frozen=True)
class Opened:
    """A socket's conversation found (``conversation_id``) and what its page may have
    missed: ``interrupted`` (for every tab) and ``caught_up`` (for this socket), as
    :func:`_catch_up` returns them."""

    conversation_id: int
    interrupted: list[Addressed]
    caught_up: list[str]


def _open(
    user: Any, session: Any, conversation_id: int, *, shown_going: Sequence[int] = (),
    last_shown: int | None = None,
) -> Opened | None:  # fmt: skip
    """Return the conversation a socket opens and its page's catch-up, or None when the
    scope's user (or guest) does not own it (sync: one ORM call, so a socket waits once
    in the queue of every run's writes, not twice)."""
    found = _find_conversation(user, session, conversation_id)
    if found is None:
        return None
    interrupted, caught_up = _catch_up(
        conversation_id=found, shown_going=shown_going, last_shown=last_shown
    )
    return Opened(found, interrupted, caught_up)


def _catch_up(
    *, conversation_id: int, shown_going: Sequence[int] = (), last_shown: int | None = None
) -> tuple[list[Addressed], list[str]]:
    """Return what a page that just joined its group may have missed (sync, one ORM call).

    The runs of a dead process, marked interrupted and rendered for every tab
    (:func:`chat.live.interrupt_stale_runs`), then the running runs, the latest one and
    those the page says it shows as going, ``shown_going``, or the whole list when the
    newest run it shows, ``last_shown``, is not the latest
    (:func:`chat.fragments.runs_caught_up`), for this socket; the last frame brings the
    queue too (a chat with no run has none).
    """
    interrupted = interrupt_stale_runs(conversation_id=conversation_id, now=utcnow())
    caught_up = fragments.runs_caught_up(
        conversation_id=conversation_id, shown_going=shown_going, last_shown=last_shown
    )
    if caught_up:
        caught_up[-1] += queued.queue_fragment(conversation_id)
    return interrupted, caught_up


def _log_failed_leave(leaving: asyncio.Future[None]) -> None:
    """Log a group discard that failed after its socket's task stopped waiting for it
    (:meth:`ChatConsumer._leave_group`)."""
    if not leaving.cancelled() and leaving.exception() is not None:
        logger.error("leaving a conversation's group failed", exc_info=leaving.exception())


def _refused_who(cookie: str | None, user: Any) -> tuple[bool, str]:
    """Return whether the session ``cookie`` names has ended
    (:func:`chat.security.session_ended`) and who the refused socket is, for the log.

    Sync: the user (lazily loaded, :class:`chat.security.LazyUserMiddleware`) is read
    here, never from async code.
    """
    if cookie and session_ended(cookie, user):
        return True, ""
    if user is not None and user.is_authenticated:
        return False, f"user {user.pk}"
    return False, "a guest" if cookie else "a visitor without a session"


@dataclass(frozen=True)
class Accepted:
    """A message taken: ``interrupted``, the fragments of the sweep that ran first;
    ``html``, what every tab shows of it (its run, or the queue with it; "" for a copy
    sent again, which was stored already); ``run_id``, the run to start (None when it
    was queued, or a copy); ``idle``, queued while no run goes (the queue's first is
    held: :meth:`chat.owner.RunOwner.send_next` tries it)."""

    interrupted: list[Addressed]
    html: str
    run_id: int | None = None
    idle: bool = False


# What the store refuses a message or another take for, in the words of _refusal.
REFUSED = (store.QueueFull, store.BranchRefused, store.RunAlreadyGoing, store.RateLimited)


def _refusal(exc: Exception, *, going: str) -> str:
    """Return the notice for a store refusal in :data:`REFUSED` (``going``: the words for
    a run already going, which differ for a message and a take)."""
    match exc:
        case store.RunWaiting():
            return RUN_WAITING
        case store.RunAlreadyGoing():
            return going
        case store.RateLimited(limit=limit, retry_after_s=seconds):
            return RATE_LIMITED.format(limit=limit, seconds=seconds)
        case _:  # QueueFull, BranchRefused: their text says why
            return str(exc)


def _accept_message(*, conversation_id: int, content: str, client_id: str = "") -> Accepted:
    """Sweep the conversation's stale runs, then store the message and its run, or queue
    it behind the run going (sync, one ORM call: the run starts after one wait in the ORM
    thread's queue, not two); see :func:`chat.store.message_send`.

    Raises :class:`MessageRefused`, carrying the sweep's fragments, for a full queue
    (or, with ``CHAT_MAX_QUEUED`` 0, a run already going or waiting) and for an owner
    over the rate limit, and :class:`chat.store.ConversationGone` for a conversation
    its owner deleted.
    """
    interrupted = interrupt_stale_runs(conversation_id=conversation_id, now=utcnow())
    try:
        sent = store.message_send(
            conversation_id=conversation_id, content=content, client_id=client_id,
            at=utcnow(), cap=settings.CHAT_MAX_QUEUED, start=queued.start_for(conversation_id),
        )  # fmt: skip
    except REFUSED as exc:
        raise MessageRefused(_refusal(exc, going=RUN_GOING), interrupted=interrupted) from None
    if sent.run is not None:
        return Accepted(interrupted, fragments.run_started(sent.run), run_id=sent.run.pk)
    if sent.queued:
        return Accepted(interrupted, queued.queue_fragment(conversation_id), idle=sent.idle)
    return Accepted(interrupted, "")


def _accept_branch(*, conversation_id: int, frame: BranchFrame) -> Accepted:
    """Sweep the conversation's stale runs, then store another take of ``frame``'s run
    and its new run (sync, one ORM call); the fragment is the branch now shown, whole.

    Raises :class:`MessageRefused`, carrying the sweep's fragments, for what
    :func:`chat.branches.create_branch` refuses (a run not of this chat, a run going or
    waiting, a retry of a run that succeeded, a model or strategy the agent does not
    allow, the rate limit), and :class:`chat.store.ConversationGone`.
    """
    interrupted = interrupt_stale_runs(conversation_id=conversation_id, now=utcnow())
    try:
        run = create_branch(
            conversation_id=conversation_id, run_id=frame.run_id, kind=BranchKind(frame.kind),
            model=frame.model, strategy=frame.strategy, content=frame.content,
            rate_limited=True,
        )  # fmt: skip
    except REFUSED as exc:
        refusal = _refusal(exc, going=BRANCH_WHILE_GOING)
        raise MessageRefused(refusal, interrupted=interrupted, of_message=False) from None
    return Accepted(interrupted, fragments.branch_shown(run.conversation), run_id=run.pk)


async def _end_unstarted(accepting: asyncio.Future[Accepted], listeners: list[Any]) -> None:
    """End as cancelled (the server stopped it) the run ``accepting`` stored, if it stored
    one: a consumer killed (Daphne stopping) before the run's task started, which the
    graceful stop cannot see."""
    try:
        accepted = await accepting
    except Exception:  # refused, or the database failed: nothing was stored
        return
    if accepted.run_id is not None:  # None: queued, or a copy stored already (no run)
        await finish_if_running(accepted.run_id, listeners)


class ChatConsumer(AsyncWebsocketConsumer):
    """Join the conversation's group, start runs for new messages, relay fragments."""

    conversation_id: int | None = None
    _session_checked_at: float = 0.0
    _rejoin: asyncio.Task[None] | None = None
    _tokens: float = FRAME_BURST
    _tokens_at: float = 0.0
    _dropped: int = 0
    _flood_notice_at: float = 0.0
    _recheck: asyncio.Task[None] | None = None
    _watch: asyncio.Task[None] | None = None

    def _take_token(self) -> bool:
        """Return True if a frame may be handled now (a token bucket per socket)."""
        now = time.monotonic()
        if self._tokens_at:
            self._tokens = min(FRAME_BURST, self._tokens + (now - self._tokens_at) * FRAME_RATE)
        self._tokens_at = now
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        return False

    async def _session_ended(self) -> bool:
        """Return True if the socket's session has ended: gone (logout, or the key changed
        at login), past its expiry date, or no longer logging in the socket's user (the
        password changed, the user was deleted or deactivated); see
        :func:`chat.security.session_ended`.

        Ownership was checked at connect; a socket opened with a session that has since
        ended must not keep reading or writing the conversation.
        """
        key = self._session_key()
        if key is None:
            return False
        self._session_checked_at = time.monotonic()
        return await database_sync_to_async(session_ended)(key, self.scope.get("user"))

    def _session_key(self) -> str | None:
        """Return the key of the socket's cookie session, None without one (tests that
        set the user directly)."""
        session = self.scope.get("session")
        return None if session is None else getattr(session, "session_key", None)

    def _in_session(self, call: Callable[[], Accepted]) -> Callable[[], Accepted]:
        """Return ``call`` checking first, in the same database call, that the socket's
        session has not ended (raises :class:`SessionEnded`): a message then waits once
        in the queue of every run's writes, not twice. Sync, for the ORM's thread."""
        key, user = self._session_key(), self.scope.get("user")
        if key is None:
            return call

        def checked() -> Accepted:
            if session_ended(key, user):
                raise SessionEnded
            return call()

        self._session_checked_at = time.monotonic()
        return checked

    async def _close_ended_session(self) -> None:
        log_refusal(self.scope, CLOSE_SESSION_ENDED, REFUSED_SESSION_ENDED)
        await self._leave_and_close(CLOSE_SESSION_ENDED)

    async def _leave_and_close(self, code: int) -> None:
        """Leave the conversation's group, then close with ``code``: the fragments
        published to it from now on are not relayed to a closed socket (an error in the
        log for each, "Attempt to send on a closed protocol")."""
        if self.conversation_id is not None:
            await self._leave_group(self.conversation_id)
            self.conversation_id = None
        await self.close(code=code)

    async def connect(self) -> None:
        conversation_id = int(self.scope["url_route"]["kwargs"]["conversation_id"])
        # Joined before the page's catch-up is read, so nothing published after that read
        # is missed (it waits in this channel until connect returns); left on a refusal.
        await self.channel_layer.group_add(group_name(conversation_id), self.channel_name)
        query = self.scope.get("query_string", b"")
        try:
            opened = await database_sync_to_async(_open)(
                self.scope.get("user"), self.scope.get("session"), conversation_id,
                shown_going=parse_going(query), last_shown=parse_last(query),
            )  # fmt: skip
        except BaseException:
            # The check failed, or the socket was cancelled while it waited (Daphne, once
            # its client left): the application ends without a disconnect, so the group
            # is left here, or every fragment of the conversation goes to a dead channel.
            await self._leave_group(conversation_id)
            raise
        if opened is None:
            await self._leave_group(conversation_id)
            code, reason = await self._refusal(conversation_id)
            log_refusal(self.scope, code, reason)
            # Accept, then close with our code: a refused handshake looks like a network
            # failure (1006) to the browser, which would keep reconnecting.
            await self.accept()
            await self.close(code=code)
            return
        self.conversation_id = opened.conversation_id
        try:
            await self._opened(opened)
        except BaseException:
            # The client left as it was accepted or caught up (a send failed, or Daphne
            # cancelled the application): no disconnect will come, so leave the group here.
            await self.disconnect(CLOSE_ABNORMAL)
            raise

    async def _opened(self, opened: Opened) -> None:
        """Accept the socket ``_open`` let in, start its watches, send its catch-up."""
        await self.accept()
        self._rejoin = asyncio.get_running_loop().create_task(self._rejoin_group())
        if self._session_key() is not None:
            self._session_checked_at = time.monotonic()  # _open just did
            self._watch = asyncio.get_running_loop().create_task(self._watch_session())
        if not settings.CHAT_RUN_WORKERS:
            owner.current()  # opened with the process under Daphne; here for tests and runserver
        # The page was rendered before this socket joined the group: send again what it
        # may have missed in between (fragments published from now on follow in order).
        await publish_each(self.channel_layer, opened.interrupted)
        for html in opened.caught_up:
            await self.send(text_data=html)

    async def _refusal(self, conversation_id: int) -> tuple[int, str]:
        """Return the close code and log reason for a conversation this socket may not open.

        A session cookie whose session is gone (logged out in another tab, expired, or
        replaced by a login) is :data:`CLOSE_SESSION_ENDED`: signing in again may help.
        Anything else is :data:`CLOSE_NOT_FOUND`, which does not say whether the
        conversation exists. Called only on refusal: it costs one query.
        """
        session = self.scope.get("session")
        cookie = self.scope.get("cookies", {}).get(settings.SESSION_COOKIE_NAME)
        sent_session = bool(cookie) and session is not None
        ended, who = await database_sync_to_async(_refused_who)(
            cookie if sent_session else None, self.scope.get("user")
        )
        if ended:
            return CLOSE_SESSION_ENDED, REFUSED_SESSION_GONE
        return CLOSE_NOT_FOUND, REFUSED_NOT_FOUND.format(conversation_id=conversation_id, who=who)

    async def disconnect(self, code: int) -> None:
        if self._rejoin is not None:
            self._rejoin.cancel()
        if self._watch is not None:
            self._watch.cancel()
        if self._recheck is not None:
            self._recheck.cancel()
        if self.conversation_id is not None:
            await self._leave_group(self.conversation_id)

    async def _leave_group(self, conversation_id: int) -> None:
        """Leave the conversation's group, and finish leaving it if cancelled meanwhile:
        Daphne cancels an application whose client left again every second, and a
        discard cut short would leave a dead channel in the group."""
        leaving = asyncio.ensure_future(
            self.channel_layer.group_discard(group_name(conversation_id), self.channel_name)
        )
        try:
            await asyncio.shield(leaving)
        except asyncio.CancelledError:
            leaving.add_done_callback(_log_failed_leave)  # nobody else will see its end
            raise

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.conversation_id is None:
            return
        if not self._take_token():
            # Checked before anything costly (JSON, the session query): a flood is cheap.
            self._dropped += 1
            if self._dropped >= FLOOD_CLOSE_AFTER:
                if self._dropped == FLOOD_CLOSE_AFTER:  # once: not for frames queued after it
                    reason = REFUSED_FLOOD.format(dropped=self._dropped)
                    log_refusal(self.scope, CLOSE_FLOOD, reason)
                await self.close(code=CLOSE_FLOOD)
                return
            now = time.monotonic()
            if now - self._flood_notice_at >= 1.0:
                self._flood_notice_at = now
                await self.send(text_data=fragments.message_refused(FLOODED))
            return
        try:
            frame: Frame | Exception = parse_frame(
                text_data, bytes_data, max_chars=settings.CHAT_MAX_MESSAGE_CHARS
            )
        except PARSE_REFUSALS as refused:  # said below, once the session is checked
            frame = refused
        # A message or a take checks the session in the call that accepts it.
        if not isinstance(frame, MessageFrame | BranchFrame) and await self._session_ended():
            await self._close_ended_session()
            return
        try:
            match frame:
                case Exception():
                    raise frame
                case MessageFrame(content=content, client_id=client_id):
                    await self._send_message(content, client_id)
                case StopFrame():
                    await self._cancel_run(frame)
                case DecisionFrame():
                    await self._decide(frame)
                case FeedbackFrame():
                    await self._give_feedback(frame)
                case BranchFrame():
                    await self._branch(frame)
                case UnqueueFrame() | SteerFrame():
                    await self._change_queue(frame)
                case _:
                    assert_never(frame)
        except FrameRefused as refused:
            said = fragments.message_refused if refused.of_message else fragments.error
            await self.send(text_data=said(str(refused)))
        except DecisionRefused as refused:
            # Said beside the card's buttons too, where the reader is looking.
            await self.send(text_data=fragments.decision_refused(refused.step_id, str(refused)))
        except FeedbackFrameRefused as refused:
            await self.send(text_data=fragments.feedback_refused(refused.run_id, str(refused)))
        except QueueFrameRefused as refused:
            await self.send(text_data=fragments.error(str(refused)))
        except store.ConversationGone:
            await self._close_deleted()
        except SessionEnded:
            await self._close_ended_session()

    async def _send_message(self, content: str, client_id: str = "") -> None:
        """Store the message and its run, show them in every tab, and start the run here;
        or queue it behind the run going, and show the queue in every tab. A copy of a
        message stored already (its ``client_id``) is acknowledged to this socket only.

        Raises :class:`MessageRefused` (after publishing the sweep's fragments) and
        :class:`chat.store.ConversationGone`; see :func:`_accept_message`.
        """
        assert self.conversation_id is not None
        accept = partial(_accept_message, conversation_id=self.conversation_id,
                         content=content, client_id=client_id)  # fmt: skip
        await self._accept_and_start(accept, fragments.message_accepted(client_id))

    async def _accept_and_start(self, accept: Callable[[], Accepted], outcome: str) -> None:
        """Run ``accept`` (sync, in the ORM's thread), show what it stored in every tab
        followed by ``outcome`` (the fragment that tells the sending page), and start its
        run here, or send the queue's first when it queued behind no run.

        Raises what ``accept`` raises; a refusal's sweep fragments are published first.
        """
        assert self.conversation_id is not None
        publisher = GroupPublisher(self.channel_layer, self.conversation_id)
        accepting = asyncio.ensure_future(database_sync_to_async(self._in_session(accept))())
        try:
            try:
                accepted = await asyncio.shield(accepting)
            except MessageRefused as refused:
                await publish_each(self.channel_layer, refused.interrupted)
                raise
            await publish_each(self.channel_layer, accepted.interrupted)
            if not accepted.html:  # a copy sent again: stored once already
                await self.send(text_data=outcome)
                return
            await publisher.publish(accepted.html + outcome)
        except asyncio.CancelledError:
            # This consumer is being killed (Daphne stopping) after the run may have been
            # stored but before its task started: end it, or it would stay "running" with
            # no task until another process's sweep, refusing the conversation's messages.
            await asyncio.shield(_end_unstarted(accepting, [publisher]))
            raise
        if accepted.run_id is not None:
            await owner.start_run(self.channel_layer, accepted.run_id, self.conversation_id)
        elif accepted.idle:
            await owner.send_next(self.channel_layer, self.conversation_id)

    async def _change_queue(self, frame: UnqueueFrame | SteerFrame) -> None:
        """Remove a queued message, or put it first and stop the run going ("Stop and
        send now": it is sent once the run has ended, or at once if none goes); show the
        queue in every tab.

        Raises :class:`chat.frames.QueueFrameRefused` for a message not queued in this
        conversation (another's, or sent or removed already): nothing changes.
        """
        assert self.conversation_id is not None
        change = queued.steer if isinstance(frame, SteerFrame) else queued.remove
        try:
            html = await database_sync_to_async(change)(
                conversation_id=self.conversation_id, queued_id=frame.queued_id
            )
        except store.NotQueued as exc:
            raise QueueFrameRefused(str(exc)) from None
        await GroupPublisher(self.channel_layer, self.conversation_id).publish(
            html + fragments.error("")
        )
        if not isinstance(frame, SteerFrame):
            return
        stopped = await request_stop(self.channel_layer, self.conversation_id, frame.run_id)
        if stopped == StopOutcome.NOTHING:
            await owner.send_next(self.channel_layer, self.conversation_id)

    async def _branch(self, frame: BranchFrame) -> None:
        """Store a retry, regenerate or edit of an earlier run, show the branch it makes in
        every tab, and start its run here, as :meth:`_send_message` does a message's.

        Raises :class:`MessageRefused` (after publishing the sweep's fragments) and
        :class:`chat.store.ConversationGone`; see :func:`_accept_branch`.
        """
        assert self.conversation_id is not None
        accept = partial(_accept_branch, conversation_id=self.conversation_id, frame=frame)
        await self._accept_and_start(accept, fragments.error(""))

    async def _cancel_run(self, frame: StopFrame) -> None:
        """Stop the conversation's run (the frame's, when it names one), in whichever
        process runs it (:func:`chat.owner.request_stop`); say so if nothing runs."""
        assert self.conversation_id is not None
        stopped = await request_stop(self.channel_layer, self.conversation_id, frame.run_id)
        if stopped == StopOutcome.NOTHING:
            said = NOTHING_TO_STOP if frame.run_id is None else STOPPED_NOTHING_ENDED
            await self.send(text_data=fragments.error(said))

    async def _decide(self, frame: DecisionFrame) -> None:
        """Store a decision on a held tool call, show it in every tab, and resume the run
        here once none of its calls waits any more.

        Raises :class:`DecisionRefused` for a decision the form refuses, a step that is not
        a held call of this chat, or one decided already: told to this socket only, it
        changes nothing.
        """
        assert self.conversation_id is not None
        try:
            decided = await database_sync_to_async(decide)(
                step_id=frame.step_id, data=frame.form_data(),
                conversation_id=self.conversation_id, user=self.scope.get("user"),
                tools_of=code_tools_for,
            )  # fmt: skip
        except store.ApprovalRefused as exc:
            raise DecisionRefused(str(exc), step_id=frame.step_id) from None
        publisher = GroupPublisher(self.channel_layer, self.conversation_id)
        await publisher.publish(decided.html + fragments.error(""))
        if decided.run_id is not None:
            await decisions_taken(self.channel_layer, [decided.run_id])

    async def _give_feedback(self, frame: FeedbackFrame) -> None:
        """Store a change to the feedback on an answer and show it in every tab.

        Raises :class:`chat.frames.FeedbackFrameRefused` for what the form or the store
        refuses (another conversation's run, a run still going, a bad rating, a comment
        too long...): told to this socket only, it changes nothing.
        """
        assert self.conversation_id is not None
        try:
            html = await database_sync_to_async(feedback.give)(
                run_id=frame.run_id, data=frame.form_data(),
                conversation_id=self.conversation_id, user=self.scope.get("user"),
            )  # fmt: skip
        except store.FeedbackRefused as exc:
            raise FeedbackFrameRefused(str(exc), run_id=frame.run_id) from None
        await GroupPublisher(self.channel_layer, self.conversation_id).publish(html)
        await self.send(text_data=fragments.error(""))

    async def dispatch(self, message: dict[str, Any]) -> None:
        """Run the handler of ``message``'s type, without Channels' hop to the database.

        Channels' ``dispatch`` first runs ``close_old_connections`` in the database
        thread for every message. Every handler here reaches the database through
        ``database_sync_to_async``, which does that itself, in the same thread; the
        extra hop queued each socket's connect, each message sent and each relayed
        fragment behind every run's writes (at 200 conversations that queue waits
        0.5 s at p50), and a relayed fragment needs no database at all.

        A message of a type this consumer has no handler for (sent by a newer process
        beside it during a rolling deploy) is logged and dropped: Channels would raise,
        which closes the socket.
        """
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            logger.warning("channel message of unknown type %r dropped", message.get("type"))
            return
        await handler(message)

    async def _close_deleted(self) -> None:
        """Close the socket of a conversation its owner deleted while it was open: 4410,
        which the page explains (the socket was its owner's, so saying so tells no one
        else anything)."""
        reason = REFUSED_DELETED.format(conversation_id=self.conversation_id)
        log_refusal(self.scope, CLOSE_DELETED, reason)
        await self._leave_and_close(CLOSE_DELETED)

    async def conversation_deleted(self, message: dict[str, Any]) -> None:
        """Close this socket: the conversation was deleted (see ``chat.live``). Not a
        socket closed already (refused: it joined the group before its check, and may
        hold the deletion published while the check ran)."""
        if self.conversation_id is None:
            return
        await self._close_deleted()

    async def layer_missed(self, message: dict[str, Any]) -> None:
        """Send the page what a reload shows: its channel was full and missed fragments
        (:class:`chat.layers.InMemoryChannelLayer`). The whole list, as a page back
        online whose newest run is not the latest is sent (:func:`_catch_up`)."""
        if self.conversation_id is None:
            return
        # Its messages may have expired unread, which ends a channel's memberships.
        await self.channel_layer.group_add(group_name(self.conversation_id), self.channel_name)
        interrupted, caught_up = await database_sync_to_async(_catch_up)(
            conversation_id=self.conversation_id, last_shown=WHOLE_LIST
        )
        await publish_each(self.channel_layer, interrupted)
        for html in caught_up:
            await self.send(text_data=html)

    async def run_fragment(self, message: dict[str, Any]) -> None:
        """Relay a fragment published to the conversation's group.

        Every :data:`SESSION_RECHECK_S` the socket's session is checked again, beside the
        relay rather than before it: the check is an ORM call, and a fragment must not wait
        in the ORM thread's queue. A session that ended is closed as the check returns;
        the socket may be sent the fragments of that wait. A socket that gets no fragments
        is checked by :meth:`_watch_session`.
        """
        if self.conversation_id is None:
            return
        await self.send(text_data=message["html"])
        if time.monotonic() - self._session_checked_at > SESSION_RECHECK_S:
            self._start_recheck()

    def _start_recheck(self) -> asyncio.Task[None]:
        """Return the session re-check under way, starting one if none is.

        The relay and :meth:`_watch_session` share it, so a socket never has two session
        queries in flight.
        """
        if self._recheck is None:
            self._session_checked_at = time.monotonic()
            self._recheck = asyncio.get_running_loop().create_task(self._recheck_session())
        return self._recheck

    async def _rejoin_group(self) -> None:
        """Join the conversation's group again every :data:`GROUP_REJOIN_S` while the
        socket is open: the layers end a membership after their ``group_expiry`` (a day)
        even for a socket that reads, and a tab left open would hear nothing more.
        Started after the accept, cancelled at disconnect."""
        while True:
            await asyncio.sleep(GROUP_REJOIN_S)
            if self.conversation_id is None:  # left its group to close
                return
            try:
                await self.channel_layer.group_add(
                    group_name(self.conversation_id), self.channel_name
                )
            except Exception:
                logger.exception("joining a chat socket's group again failed")

    async def _watch_session(self) -> None:
        """Re-check the session every :data:`SESSION_RECHECK_S` while the socket is open.

        A socket that only listens gets no frame and may get no fragment for hours: without
        this its session would never be checked again. It costs one ORM call per
        :data:`SESSION_RECHECK_S` per socket, and none while messages or fragments keep the
        check fresh (``_session_checked_at``). Started after the accept, cancelled at
        disconnect; ends when the socket is closed.
        """
        while self.conversation_id is not None:
            wait = self._session_checked_at + SESSION_RECHECK_S - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            # asyncio.wait, not await: cancelling the watch must not cancel a check the
            # relay shares (disconnect cancels that one itself).
            await asyncio.wait([self._start_recheck()])

    async def _recheck_session(self) -> None:
        """Close the socket if its session has ended (see :meth:`run_fragment` and
        :meth:`_watch_session`)."""
        try:
            if self.conversation_id is not None and await self._session_ended():
                await self._close_ended_session()
        except Exception:
            logger.exception("re-checking the session of a chat socket failed")
        finally:
            self._recheck = None


class NotFoundConsumer(AsyncWebsocketConsumer):
    """Close sockets opened on a path the chat does not serve, with code 4404."""

    async def connect(self) -> None:
        log_refusal(self.scope, CLOSE_NOT_FOUND, REFUSED_NO_ROUTE)
        await self.accept()
        await self.close(code=CLOSE_NOT_FOUND)
