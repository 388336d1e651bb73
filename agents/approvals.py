"""People in the loop: which tool calls need a person's approval, and what a decision does.

A tool's policy (:class:`ToolPolicy`) is ``allow`` (it runs), ``ask`` (the run pauses
until a person approves, edits or denies the call) or ``deny`` (it never runs; the model
reads an error observation saying so). :func:`agents.runtime.run` takes a
:data:`PolicyLookup` (tool name -> policy); the Django side builds it from settings, the
admin's table and the conversation's "always allow" grants.

A turn whose calls include ``ask`` ones runs the others (``allow``, and the ``deny`` and
broken ones reported as errors), yields an :class:`agents.events.ApprovalRequested` per
held call and ends with :class:`agents.events.RunPaused`: the loop's generator returns and
nothing of the run stays in memory. Whoever holds the decisions resumes it later, in any
process, with a :class:`Resume` rebuilt from the stored steps: the approved calls run
(with the person's edited arguments), a denied or expired one becomes an error
observation (:func:`denial`), and the loop goes on from the next model turn. So a pause
survives reloads, closed tabs and restarts; the price is one model scratchpad rebuilt
from rows per resume, as history is (:mod:`agents.history`).

LangGraph's ``interrupt()`` / ``Command(resume=...)`` (human-in-the-loop) pauses a graph
the same way: state saved by a checkpointer, resumed by whoever sends the command, with
the decision as the value the paused node receives.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.strategies import ToolAgentAction
from agents.strategies.base import IntermediateStep


class ToolPolicy(enum.StrEnum):
    """Whether a call to a tool runs: at once, after a person's approval, or never."""

    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


PolicyLookup = Callable[[str], ToolPolicy]
"""A tool's policy by its name (an unknown name: whatever the lookup says; the loop
reports an unknown tool as an error before asking)."""


class Outcome(enum.StrEnum):
    """How a held call's wait ended: a person approved or denied it, it waited longer
    than the approval time-out (``expired``, treated as denied), or its run was stopped
    while it waited (``cancelled``: it never ran and the run ended)."""

    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"
    CANCELLED = "cancelled"


# ``error_type`` of a call that did not run because of a policy or a decision; not a
# format error (the model's output was fine), so it stays in later history and counts
# towards :class:`agents.stopping.RepeatedFailures`.
DENIED_BY_POLICY = "ToolDenied"
DENIED_BY_PERSON = "ApprovalDenied"
APPROVAL_EXPIRED = "ApprovalExpired"
APPROVAL_CANCELLED = "ApprovalCancelled"
"""``error_type`` of a held call its run's end closed (a stop, a crash): it never ran."""
REFUSAL_TYPES = frozenset(
    {DENIED_BY_POLICY, DENIED_BY_PERSON, APPROVAL_EXPIRED, APPROVAL_CANCELLED}
)
"""``error_type`` values of calls that did not run because of a policy or a decision: not
tool errors (the tool was never asked), so not counted as such."""

POLICY_DENIED = (
    "Error: tool {name!r} may not be called here (its policy is deny); it did not run. "
    "Answer without it."
)
PERSON_DENIED = (
    "Error: a person reviewing this call to {name!r} denied it, so it did not run.{reason} "
    "Do not call it again with the same arguments: answer without it, or say what you "
    "would need."
)
DENIAL_REASON = ' Their reason: "{reason}"'
"""Put in :data:`PERSON_DENIED` when the person gave a reason."""
EXPIRED = (
    "Error: this call to {name!r} waited for a person's approval for over {timeout:g} "
    "seconds and expired; it did not run. Answer without it."
)
EDITED = "(A person edited the arguments of this call before approving it; it ran with: {args})"
_EDITED_HEAD = EDITED.split("{args}")[0]


@dataclass(frozen=True)
class Decision:
    """What a person (or the clock) decided about one held call.

    ``outcome`` approved / denied / expired; ``args`` the arguments to run with when a
    person edited them (None: as the model asked); ``reason`` the person's optional
    reason for a denial; ``timeout_s`` the approval time-out an ``expired`` call waited.
    """

    outcome: Outcome
    args: dict[str, Any] | str | None = None
    reason: str = ""
    timeout_s: float = 0.0

    @property
    def approved(self) -> bool:
        """Return True if the call may run."""
        return self.outcome == Outcome.APPROVED


def denial(name: str, decision: Decision) -> tuple[str, str]:
    """Return ``(observation, error_type)`` of a held call that will not run."""
    if decision.outcome == Outcome.EXPIRED:
        return EXPIRED.format(name=name, timeout=decision.timeout_s), APPROVAL_EXPIRED
    reason = DENIAL_REASON.format(reason=decision.reason.strip()) if decision.reason.strip() else ""
    return PERSON_DENIED.format(name=name, reason=reason), DENIED_BY_PERSON


def edited_note(args: Any) -> str:
    """Return the note put before the result of a call a person approved with other
    arguments, so the model knows what ran."""
    return EDITED.format(args=json.dumps(args, ensure_ascii=False, default=str))


def with_edited_note(observation: str, args: Any) -> str:
    """Return ``observation`` starting with :func:`edited_note` of ``args`` (as it is when
    it starts with that very note already: a result that only looks like one, written by
    the tool, gets the note before it)."""
    note = edited_note(args)
    if observation == note or observation.startswith(f"{note}\n"):
        return observation
    return f"{note}\n{observation}"


def without_edited_note(observation: str) -> str:
    """Return the tool's result of an observation that starts with :func:`edited_note`
    (``observation`` itself for any other)."""
    if not observation.startswith(_EDITED_HEAD):
        return observation
    return observation.partition("\n")[2]


def refused(action: ToolAgentAction, observation: str, error_type: str) -> ToolAgentAction:
    """Return ``action`` marked as a call that will not run, reporting ``observation``."""
    return action.model_copy(update={"error": observation, "error_type": error_type})


def apply_policy(
    actions: Sequence[ToolAgentAction], policy: PolicyLookup | None, tools: Mapping[str, Any]
) -> tuple[list[ToolAgentAction], frozenset[str]]:
    """Return ``(actions, held)``: the turn's actions in the order the model asked, those
    of ``deny`` tools turned into errors (broken ones and unknown tools as they are), and
    the ``tool_call_id`` of each one held for a person (``ask``)."""
    if policy is None:
        return list(actions), frozenset()
    decided: list[ToolAgentAction] = []
    held: set[str] = set()
    for action in actions:
        if not action.error and action.tool in tools:
            match policy(action.tool):
                case ToolPolicy.ASK:
                    held.add(action.tool_call_id)
                case ToolPolicy.DENY:
                    error = POLICY_DENIED.format(name=action.tool)
                    action = refused(action, error, DENIED_BY_POLICY)
        decided.append(action)
    return decided, frozenset(held)


@dataclass(frozen=True)
class Resume:
    """A paused run, rebuilt from its stored steps, to go on with.

    ``iteration``: the model turn whose calls were held; ``steps``: the ``(action,
    observation)`` pairs of the turns before it; ``turn``: the paused turn's pairs in the
    order the model asked (a held call's observation is a placeholder, replaced once it
    runs or is refused); ``decisions``: by ``tool_call_id``, one per held call;
    ``usage``: the run's token counts so far; ``spent_s``: seconds of the run's wall
    clock spent before the pause (waiting for a person does not count towards
    ``max_execution_time``).
    """

    iteration: int
    steps: Sequence[IntermediateStep]
    turn: Sequence[IntermediateStep]
    decisions: Mapping[str, Decision]
    usage: Mapping[str, int] = field(default_factory=dict)
    spent_s: float = 0.0

    def to_run(self) -> list[ToolAgentAction]:
        """Return the held actions as they will be reported, in the order the model
        asked: approved ones with the arguments a person gave, the others marked refused
        (:func:`denial`)."""
        actions = []
        for action, _ in self.turn:
            decision = self.decisions.get(action.tool_call_id)
            if decision is None:
                continue
            if decision.approved:
                if decision.args is not None:
                    action = action.model_copy(update={"tool_input": decision.args})
                actions.append(action)
            else:
                actions.append(refused(action, *denial(action.tool, decision)))
        return actions
