"""A run's lifecycle: the user's message and a running run, its steps, its end."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from django.db import transaction
from django.db.models import Max, Q

from agents.approvals import APPROVAL_CANCELLED
from agents.timing import whole_ms
from chat.models import (
    AgentRun,
    AgentSnapshot,
    AgentStep,
    Conversation,
    Message,
    RunStatus,
    StepKind,
    StepStatus,
)
from chat.store.approvals import NEVER_RAN, approvals_close
from chat.store.conversations import title_from
from chat.store.limits import check_rate, runs_interrupt_stale
from chat.store.rows import count_tool_calls, fitted, runs_loaded, storable
from chat.store.tree import path_leaf
from chat.store.usage import conversation_usage, usage_settle
from chat.traces import live as telemetry

CANCELLED_STEP = "Cancelled before this step finished."
ENDED_FOR_GOOD = (
    RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.MAX_ITERATIONS,
    RunStatus.TIME_LIMIT, RunStatus.REPEATED_FAILURE, RunStatus.BUDGET_EXCEEDED,
)  # fmt: skip


class ModelProvenance(NamedTuple):
    """What a run records of its model: provider name, model name, host[:port]."""

    provider: str
    model_name: str
    endpoint: str


class RunAlreadyGoing(Exception):
    """Raised when a conversation already has a running run."""


class RunWaiting(RunAlreadyGoing):
    """Raised when a conversation's run waits for a decision on a tool call."""


class ConversationGone(Exception):
    """Raised when the conversation's owner deleted it: it takes no new message."""


def run_start(
    *,
    conversation_id: int,
    content: str,
    provider: str = "",
    model_name: str = "",
    started_at: datetime,
    runs_per_minute: int | None = None,
    endpoint: str = "",
    model_of: Callable[[str], ModelProvenance] | None = None,
    agent_of: Callable[[str], str] | None = None,
) -> AgentRun:
    """Store the user's message and a new running run for it; return the run.

    The message continues the branch the conversation shows (its parent is that branch's
    leaf, :func:`chat.store.branches.path_leaf`) and becomes its ``current_message``.

    The run records ``provider``, ``model_name`` and ``endpoint``, or with ``model_of``
    what it returns for the conversation's ``model_key`` as read under the lock that
    fixes it (so the run names the model its conversation had when the message came);
    with ``agent_of``, the agent name it returns for the conversation's ``agent_key``,
    which the conversation keeps from then on (else that key as it is).

    The run comes back with its conversation and user message, as rendering it needs.
    Raises :class:`ConversationGone` if its owner deleted it (a tab open since may still
    send), :class:`RunAlreadyGoing` if the conversation has a running run already, and
    :class:`chat.store.limits.RateLimited` if ``runs_per_minute`` is set and the
    conversation's owner (the user, or the guest's browser) has started that many runs,
    in any of their conversations, in the minute before ``started_at``. Nothing is
    stored then.
    """
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(pk=conversation_id)
        if conversation.hidden_at is not None:
            raise ConversationGone(conversation_id)
        runs_interrupt_stale(conversation_id=conversation_id, now=started_at)
        going = conversation.runs.filter(status__in=(RunStatus.RUNNING, RunStatus.WAITING))
        status = going.values_list("status", flat=True).first()
        if status == RunStatus.WAITING:
            raise RunWaiting(conversation_id)
        if status is not None:
            raise RunAlreadyGoing(conversation_id)
        if runs_per_minute is not None:
            check_rate(conversation, runs_per_minute, started_at)
        if not conversation.title:
            conversation.title = title_from(content)
        agent_key = conversation.agent_key
        if agent_of is not None:
            # Blank (the default agent) is fixed to its name by the first message.
            conversation.agent_key = agent_key = agent_of(agent_key)
        # The question continues the branch the page shows (chat.store.branches).
        message = Message.objects.create(
            conversation=conversation, role=Message.Role.USER, content=content,
            parent_id=path_leaf(conversation),
        )  # fmt: skip
        conversation.current_message = message
        conversation.save(update_fields=["title", "agent_key", "current_message", "updated_at"])
        native = conversation.uses_native_tool_calls
        if model_of is not None:
            provider, model_name, endpoint = model_of(conversation.model_key)
        return AgentRun.objects.create(
            conversation=conversation,
            user_message=message,
            agent_key=agent_key,
            strategy=conversation.strategy,
            tool_choice=conversation.tool_choice if native else "",
            parallel_tool_calls=conversation.parallel_tool_calls if native else None,
            provider=provider,
            model_name=model_name,
            endpoint=endpoint,
            started_at=started_at,
            heartbeat_at=started_at,
        )


def run_get(*, run_id: int) -> AgentRun:
    """Return the run with its conversation and user message loaded."""
    return AgentRun.objects.select_related("conversation", "user_message").get(pk=run_id)


def conversation_runs(*, conversation_id: int) -> list[AgentRun]:
    """Return the conversation's runs, oldest first, loaded for rendering."""
    runs = AgentRun.objects.filter(conversation_id=conversation_id)
    return list(runs_loaded(runs).order_by("started_at", "id"))


def latest_run_shown(*, conversation_id: int) -> int | None:
    """Return the id of the latest run of the branch the conversation shows (not of
    another branch), or of its latest run; None when it has none of its own."""
    runs = AgentRun.objects.filter(conversation_id=conversation_id)
    conversation = Conversation.objects.get(pk=conversation_id)
    latest = runs.filter(user_message_id=path_leaf(conversation)).values_list("id", flat=True)
    latest = latest.first()
    if latest is None:
        latest = runs.order_by("-started_at", "-id").values_list("id", flat=True).first()
    return latest


def runs_to_catch_up(*, conversation_id: int, shown_going: Sequence[int] = ()) -> list[AgentRun]:
    """Return the runs a newly connected page may have missed: running or waiting ones,
    the latest of the branch shown, and those of ``shown_going`` (the runs the page shows
    as going: one may have ended while it was away, the queue's next started since).

    Loaded like :func:`conversation_runs`, oldest first.
    """
    runs = AgentRun.objects.filter(conversation_id=conversation_id)
    latest = latest_run_shown(conversation_id=conversation_id)
    if latest is None:
        return []
    # Only those runs are loaded, not a long conversation's whole history with its steps.
    going = Q(status__in=(RunStatus.RUNNING, RunStatus.WAITING)) | Q(pk__in=shown_going)
    wanted = runs.filter(Q(pk=latest) | going)
    return list(runs_loaded(wanted).order_by("started_at", "id"))


def run_heartbeat(*, run_id: int, at: datetime) -> None:
    """Record that the process running ``run_id`` is alive at ``at``."""
    AgentRun.objects.filter(pk=run_id, status=RunStatus.RUNNING).update(heartbeat_at=at)


def run_set_owner(*, run_id: int, owner_channel: str) -> None:
    """Record ``owner_channel`` as the run owner now running ``run_id`` (chat.owner)."""
    AgentRun.objects.filter(pk=run_id).update(owner_channel=owner_channel)


def run_take_owner(*, run_id: int, owner_channel: str) -> bool:
    """Record ``owner_channel`` as the owner of the new run ``run_id`` it is about to run,
    if the run still runs with no other owner (blank, or this one after
    :func:`run_claim_start`); return whether it did. False: a Stop ended it before any
    owner took it (:func:`run_stop_unclaimed`), or another owner has
    it; either way it must not run here."""
    mine = AgentRun.objects.filter(
        pk=run_id, status=RunStatus.RUNNING, owner_channel__in=("", owner_channel)
    )
    return mine.update(owner_channel=owner_channel) == 1


def run_claim_start(*, run_id: int, conversation_id: int, owner_channel: str, at: datetime) -> bool:
    """Record ``owner_channel`` as the owner of run ``run_id`` of ``conversation_id`` (and
    its heartbeat at ``at``) if it is running and no owner has it yet; return whether this
    call did.

    One conditional UPDATE, so of the run owners told of a new run
    (:data:`chat.owner.START_MESSAGE_TYPE`) exactly one starts it. The conversation must
    match too: a run owner on another database (a wrong ``DATABASE_URL``) is unlikely to
    hold a running, unclaimed run of the same id in the same conversation.
    """
    unclaimed = AgentRun.objects.filter(
        pk=run_id, conversation_id=conversation_id, status=RunStatus.RUNNING, owner_channel=""
    )
    return unclaimed.update(owner_channel=owner_channel, heartbeat_at=at) == 1


def run_release_claim(*, run_id: int, owner_channel: str) -> None:
    """Give back run ``run_id`` that ``owner_channel`` claimed but will not run (its owner
    is stopping): unclaimed again, for another run owner's sweep."""
    AgentRun.objects.filter(
        pk=run_id, status=RunStatus.RUNNING, owner_channel=owner_channel
    ).update(owner_channel="")


def run_unclaimed(*, run_id: int) -> bool:
    """Return whether run ``run_id`` is running with no owner (:func:`run_claim_start`)."""
    return AgentRun.objects.filter(pk=run_id, status=RunStatus.RUNNING, owner_channel="").exists()


def runs_unclaimed(*, before: datetime) -> list[tuple[int, int]]:
    """Return ``(run_id, conversation_id)`` of the running runs no owner has claimed whose
    heartbeat (their start, as none has beaten) is older than ``before``, oldest first:
    runs whose start message no run owner heard."""
    unclaimed = AgentRun.objects.filter(
        status=RunStatus.RUNNING, owner_channel="", heartbeat_at__lt=before
    )
    return list(unclaimed.order_by("started_at", "id").values_list("id", "conversation_id"))


def run_request_cancel(
    *, conversation_id: int, at: datetime, run_id: int | None = None, unclaimed: bool = False
) -> AgentRun | None:
    """Ask for the conversation's running run to stop (only if it is ``run_id``, when
    given); return it, or None if none runs.

    Only records the request (``cancel_requested_at``); the run's owner cancels its task
    when told (:func:`chat.owner.request_stop`) or when its heartbeat notices. With
    ``unclaimed``, only a run no run owner has taken yet, its row locked until the
    caller's transaction ends (:func:`run_stop_unclaimed`).
    """
    with transaction.atomic():
        running = AgentRun.objects.filter(conversation_id=conversation_id, status=RunStatus.RUNNING)
        if run_id is not None:
            running = running.filter(pk=run_id)
        if unclaimed:
            running = running.filter(owner_channel="")
        run = running.select_for_update().first()
        if run is None:
            return None
        if run.cancel_requested_at is None:
            run.cancel_requested_at = at
            run.save(update_fields=["cancel_requested_at"])
        return run


def run_stop_unclaimed(
    *, conversation_id: int, at: datetime, end: Callable[[int], Any], run_id: int | None = None
) -> Any:
    """Stop the conversation's running run that no run owner has taken yet (only if it
    is ``run_id``, when given; ``CHAT_RUN_WORKERS``): record its stop request and call
    ``end(its id)`` to record its end, in one transaction that holds the run's row, so a
    run owner's claim (:func:`run_claim_start`, :func:`run_take_owner`) waits and then
    finds it ended. Return what ``end`` returned, or None when no such run goes."""
    with transaction.atomic():
        run = run_request_cancel(conversation_id=conversation_id, at=at, run_id=run_id,
                                 unclaimed=True)  # fmt: skip
        return None if run is None else end(run.pk)


def run_cancel_requested(*, run_id: int) -> bool:
    """Return True if someone asked for the run to stop."""
    return AgentRun.objects.filter(pk=run_id, cancel_requested_at__isnull=False).exists()


def run_beat(*, run_id: int, at: datetime) -> bool:
    """Record the run's heartbeat at ``at`` (:func:`run_heartbeat`) and return whether
    someone asked for it to stop (:func:`run_cancel_requested`): one call for both, so a
    beat costs the ORM's thread one hop, not two."""
    run_heartbeat(run_id=run_id, at=at)
    return run_cancel_requested(run_id=run_id)


def run_finish(
    *,
    run_id: int,
    status: str,
    output: str,
    error: str,
    iterations: int,
    usage: dict[str, int],
    finished_at: datetime,
) -> AgentRun:
    """Store how the run ended, close any step still running, add the assistant message.

    A run that had ended already is returned as it was recorded: the first end stands (a
    stop that came as the run finished), except that a live process may still finish a
    run the sweep took for dead (interrupted). Token counts are ``usage``, or the sums of
    the finished model turns' counts when it has none, and the cost is worked out from
    them (:func:`chat.store.usage.usage_settle`). The run comes back loaded for rendering
    (the page is sent a stopped run whole again, and a status line lists its model
    turns' tokens) with ``conversation_usage`` set for the page's header.
    """
    with transaction.atomic():
        # Loaded with what rendering the end reads (runs_loaded's joins; the steps below),
        # so the run is not read again after.
        locked = AgentRun.objects.select_for_update(of=("self",))
        run = locked.select_related("conversation", "user_message", "feedback").get(pk=run_id)
        if run.status in ENDED_FOR_GOOD:
            return _ended(run_id)
        output, error = storable(output), storable(error)
        run.status = status
        run.output = output
        run.error = error
        run.iterations = iterations
        run.finished_at = finished_at
        run.duration_ms = max(0, whole_ms(finished_at - run.started_at))
        loaded = run.steps.select_related("approval").order_by("ordinal")
        steps = list(loaded)  # kept in ``loaded``'s result cache too
        # Steps still going are closed with a short reason; the run's line says the rest.
        closed = CANCELLED_STEP if status == RunStatus.CANCELLED else error
        for step in steps:
            step.run = run  # as runs_loaded's prefetch sets it: no query for it
            if step.status not in (StepStatus.RUNNING, StepStatus.PENDING):
                continue
            if step.status == StepStatus.PENDING:  # held for approval: it never ran
                step.error_type, step.error = APPROVAL_CANCELLED, NEVER_RAN
            else:
                step.error = closed or f"run ended: {status}"
            # Each closed step's duration agrees with its instants, as a finished one's.
            step.status = StepStatus.ERROR
            step.finished_at = max(finished_at, step.started_at)
            step.duration_ms = whole_ms(step.finished_at - step.started_at)
            step.save(update_fields=["status", "error", "error_type", "finished_at",
                                     "duration_ms"])  # fmt: skip
        usage_settle(run, usage)
        count_tool_calls(run, steps)
        run.save()
        approvals_close(run_id=run.pk, at=finished_at)
        telemetry.run_ended(run.pk)  # sent once this commits, when live export is on
        if output:
            Message.objects.create(
                conversation_id=run.conversation_id,
                role=Message.Role.ASSISTANT,
                content=output,
                run=run,
            )
        Conversation.objects.filter(pk=run.conversation_id).update(updated_at=finished_at)
        run.conversation.updated_at = finished_at
    # What runs_loaded's prefetch would have set (Django's prefetch_one_level): the
    # evaluated queryset of the steps, in order, as just saved.
    loaded._prefetch_done = True
    run._prefetched_objects_cache = {"steps": loaded}
    run.conversation_usage = conversation_usage(conversation_id=run.conversation_id)
    return run


def _ended(run_id: int) -> AgentRun:
    """Return an ended run loaded for rendering, with its conversation's summed usage."""
    run = runs_loaded(AgentRun.objects.filter(pk=run_id)).get()
    run.conversation_usage = conversation_usage(conversation_id=run.conversation_id)
    return run


def step_start(
    *,
    run_id: int,
    kind: StepKind,
    iteration: int,
    started_at: datetime,
    tool_name: str = "",
    tool_call_id: str = "",
    arguments: Any = None,
    text: str = "",
    run: AgentRun | None = None,
    ordinal: int | None = None,
    status: StepStatus = StepStatus.RUNNING,
) -> AgentStep:
    """Insert a step (running, or ``pending`` for a call held for approval) with the next
    ordinal of its run; return it (with its run, and known to have no approval yet).

    Values are stored as :func:`chat.store.rows.fitted` makes them: NUL characters
    replaced, a tool name or call id longer than its column cut (also in
    :func:`step_finish`, :func:`step_save_text` and :func:`run_finish`).

    A caller that is the run's only writer of steps and counts them (the recorder) passes
    the ``run`` row it holds and the ``ordinal``: the step is then one INSERT, without
    the locked read of the run and of the last ordinal (a second step with that ordinal
    raises ``IntegrityError``: the unique ``(run, ordinal)`` constraint).
    """
    if run is not None and ordinal is not None:
        if run.pk != run_id:
            raise ValueError(f"run {run.pk} given for run_id {run_id}")
        return _without_approval(AgentStep.objects.create(
            run=run, ordinal=ordinal, iteration=iteration, kind=kind, started_at=started_at,
            status=status, **fitted(AgentStep, tool_name=tool_name, tool_call_id=tool_call_id,
                                    arguments=arguments, text=text),
        ))  # fmt: skip
    with transaction.atomic():
        # Lock the run row so concurrent writers cannot take the same ordinal.
        run = AgentRun.objects.select_for_update().get(pk=run_id)
        last = AgentStep.objects.filter(run_id=run_id).aggregate(n=Max("ordinal"))["n"] or 0
        return _without_approval(AgentStep.objects.create(
            run=run,  # kept on the step, so rendering it reads the run's strategy freely
            ordinal=last + 1,
            iteration=iteration,
            kind=kind,
            started_at=started_at,
            status=status,
            **fitted(AgentStep, tool_name=tool_name, tool_call_id=tool_call_id,
                     arguments=arguments, text=text),
        ))  # fmt: skip


def _without_approval(step: AgentStep) -> AgentStep:
    """Return a new ``step`` known to have no approval, as ``select_related`` would say:
    rendering it then asks the database nothing (:func:`chat.store.approval_request`
    sets the one it gets)."""
    AgentStep.approval.related.set_cached_value(step, None)
    return step


def step_resume(*, step: AgentStep, started_at: datetime, arguments: Any) -> AgentStep:
    """Start a held call that was approved: ``running`` from ``started_at`` with the
    ``arguments`` it runs with (a person's edit, or as asked); one UPDATE."""
    step.status, step.started_at = StepStatus.RUNNING, started_at
    step.arguments = fitted(AgentStep, arguments=arguments)["arguments"]
    step.save(update_fields=["status", "started_at", "arguments"])
    return step


def step_finish(
    *,
    step_id: int,
    finished_at: datetime,
    started_at: datetime | None = None,
    step: AgentStep | None = None,
    **fields: Any,
) -> AgentStep:
    """Update a step with its outcome (``status``, ``result``, ``error_type``, a tool
    call's ``result_blocks`` and ``artifact``...); return it with its run.

    ``started_at``, when given, replaces the start stored when the step was inserted: the
    runtime measures a step's start and finish where its work happens
    (:mod:`agents.timing`), a little after the row was written. ``duration_ms`` is always
    ``finished_at - started_at`` in whole milliseconds, never passed in (``TypeError``),
    so the two can never disagree.

    ``step``, the row :func:`step_start` returned (the recorder keeps it), saves reading
    it again: the step is then one UPDATE of the columns that changed, and ``step`` itself
    comes back updated. Only the step's own writer may pass it (``step_save_text`` does
    not touch the columns written here).
    """
    if "duration_ms" in fields:
        raise TypeError("duration_ms is finished_at - started_at: pass the instants")
    if step is None:
        step = AgentStep.objects.select_related("run", "approval").get(pk=step_id)
    elif step.pk != step_id:
        raise ValueError(f"step {step.pk} given for step_id {step_id}")
    values = fitted(AgentStep, **fields)
    for name, value in values.items():
        setattr(step, name, value)
    if started_at is not None:
        step.started_at = started_at
    step.finished_at = max(finished_at, step.started_at)
    step.duration_ms = whole_ms(step.finished_at - step.started_at)
    step.save(update_fields=[*values, "started_at", "finished_at", "duration_ms"])
    return step


def step_save_text(*, step_id: int, text: str, reasoning: str | None = None) -> None:
    """Save a streaming model turn's text so far, and its reasoning so far when given."""
    fields = {"text": storable(text)}
    if reasoning is not None:
        fields["reasoning"] = storable(reasoning)
    AgentStep.objects.filter(pk=step_id).update(**fields)


def run_with_steps(*, run_id: int) -> AgentRun:
    """Return the run with its steps in order (``run.steps.all()``), as a timeline reads it."""
    return runs_loaded(AgentRun.objects.filter(pk=run_id)).get()


def run_snapshot_record(*, run_id: int, content: Mapping[str, Any], digest: str) -> None:
    """Record what defined run ``run_id`` (``content``, whose hash is ``digest``): the
    :class:`chat.models.AgentSnapshot` with that digest, stored now if it is new.

    A run that has one keeps it (a resumed run was given what it started with).
    """
    snapshot, _ = AgentSnapshot.objects.get_or_create(digest=digest,
                                                      defaults={"content": content})  # fmt: skip
    AgentRun.objects.filter(pk=run_id, snapshot__isnull=True).update(snapshot=snapshot)


def snapshot_mcp_tool_names(*, recent: int = 200) -> list[str]:
    """Return the names of the MCP tools the ``recent`` newest snapshots gave a model,
    each once, newest first: an MCP server's tools are known only to the runs that
    listed them, and these are the names the run list filters by."""
    names: dict[str, None] = {}
    for content in AgentSnapshot.objects.values_list("content", flat=True)[:recent]:
        for tool in content.get("tools", []):
            if str(tool.get("source", "")).startswith("mcp:"):
                names.setdefault(tool["name"])
    return list(names)
