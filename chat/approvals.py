"""People in the loop on the Django side: each tool's policy, checking a decision, and
resuming the runs that waited for one.

The loop (:mod:`agents.approvals`) holds a call to an ``ask`` tool and pauses its run;
this module says which tools those are (:func:`policy_lookup`: ``AGENT_TOOL_POLICIES``,
overridden per tool by staff in the admin, and the conversation's "always allow"
grants), and turns a decision frame into a stored decision (:func:`decide`); the run goes on in
whichever process claims it first (:func:`chat.runs.resume_ready`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from django.conf import settings
from pydantic import ValidationError

from agents.approvals import Outcome, PolicyLookup, ToolPolicy
from agents.events import utcnow
from agents.tool_calls import schema_errors
from chat import fragments, store
from chat.validation import unstorable

MAX_REASON_CHARS = 1_000
MAX_ARGUMENTS_CHARS = 20_000
ARGUMENTS_TOO_LONG = (
    "The edited arguments are too long: at most {limit:,} characters. Nothing was decided."
)
ARGUMENTS_NOT_JSON = "The edited arguments are not JSON: {error}. Nothing was decided."
ARGUMENTS_INVALID = (
    "The edited arguments do not match the tool {name!r}: {error}. Nothing was decided."
)
ARGUMENTS_UNSTORABLE = (
    "The edited arguments contain characters that cannot be stored ({what}). Nothing was decided."
)
ARGUMENTS_TOO_DEEP = "The edited arguments are nested too deeply to read. Nothing was decided."
ARGUMENTS_NOT_OBJECT = "The edited arguments must be a JSON object. Nothing was decided."


# Where a tool's policy comes from (the admin's policies page says it).
FROM_ADMIN = "set in this admin"
FROM_SETTING = "AGENT_TOOL_POLICIES"
FROM_AGENT = "the agent's definition"
BY_DEFAULT = "default"
NO_POLICIES: Mapping[str, str] = MappingProxyType({})


def policy_of(
    name: str, admin_policies: Mapping[str, str], agent_policies: Mapping[str, str] = NO_POLICIES
) -> tuple[ToolPolicy, str]:
    """Return tool ``name``'s policy and where it comes from: the admin's
    (:class:`chat.models.ToolApprovalPolicy`, ``admin_policies`` by tool name), else
    ``AGENT_TOOL_POLICIES``'s, else the run's agent's (``agent_policies``:
    :func:`chat.agents.tool_policies`, where an MCP server's tools are ``ask``), else
    ``allow``."""
    if name in admin_policies:
        return ToolPolicy(admin_policies[name]), FROM_ADMIN
    if name in settings.AGENT_TOOL_POLICIES:
        return ToolPolicy(settings.AGENT_TOOL_POLICIES[name]), FROM_SETTING
    if name in agent_policies:
        return ToolPolicy(agent_policies[name]), FROM_AGENT
    return ToolPolicy.ALLOW, BY_DEFAULT


@dataclass(frozen=True)
class PolicyRows:
    """What the database says of a conversation's tool policies: the admin's policies
    and the tools "always allowed" in it (:func:`policy_rows`)."""

    admin_policies: Mapping[str, str]
    granted: frozenset[str]

    def lookup(self, agent_policies: Mapping[str, str] = NO_POLICIES) -> PolicyLookup:
        """Return the policies a run uses: :func:`policy_of`'s, with a tool "always
        allowed" in the conversation (:class:`chat.models.ToolGrant`) ``allow`` where it
        would ``ask``, never where it is ``deny``."""

        def lookup(name: str) -> ToolPolicy:
            policy, _ = policy_of(name, self.admin_policies, agent_policies)
            if policy == ToolPolicy.ASK and name in self.granted:
                return ToolPolicy.ALLOW
            return policy

        return lookup


def policy_rows(*, conversation_id: int) -> PolicyRows:
    """Return the conversation's tool policy rows (sync: two queries)."""
    admin_policies = store.tool_policies()
    granted = store.conversation_grants(conversation_id=conversation_id)
    return PolicyRows(admin_policies, frozenset(granted))


def policy_lookup(
    *, conversation_id: int, agent_policies: Mapping[str, str] = NO_POLICIES
) -> PolicyLookup:
    """Return the tool policies a run of the conversation uses (sync: two queries;
    :meth:`PolicyRows.lookup`)."""
    return policy_rows(conversation_id=conversation_id).lookup(agent_policies)


def checked_arguments(tool_name: str, text: str, tools: Sequence[Any]) -> dict[str, Any]:
    """Return the edited arguments ``text`` (JSON) for ``tool_name`` once its schema
    accepts them (the arguments stored are the JSON as given, not the schema's
    coerced values).

    Raises :class:`chat.store.ApprovalRefused` with what is wrong: not JSON, not an
    object, or not what the tool's ``args_schema`` accepts (a tool no longer registered
    takes any object).
    """
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise store.ApprovalRefused(ARGUMENTS_NOT_JSON.format(error=exc)) from None
    except RecursionError:
        raise store.ApprovalRefused(ARGUMENTS_TOO_DEEP) from None
    if not isinstance(value, dict):
        raise store.ApprovalRefused(ARGUMENTS_NOT_OBJECT)
    bad = _unstorable_in(value)  # JSON escapes (\\u0000, \\ud800) parse into such text
    if bad is not None:
        raise store.ApprovalRefused(ARGUMENTS_UNSTORABLE.format(what=bad))
    tool = next((t for t in tools if t.name == tool_name), None)
    schema = getattr(tool, "args_schema", None)
    if schema is not None and hasattr(schema, "model_validate"):
        try:
            schema.model_validate(value)
        except ValidationError as exc:
            error = schema_errors(exc)
            raise store.ApprovalRefused(
                ARGUMENTS_INVALID.format(name=tool_name, error=error)
            ) from None
    return value


def _unstorable_in(value: Any) -> str | None:
    """Return what no database stores in any key or string of the JSON ``value``, or
    None (see :func:`chat.validation.unstorable`). Iterative: JSON nests deep."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            bad = unstorable(item)
            if bad is not None:
                return bad
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


@dataclass(frozen=True)
class DecisionFrame:
    """A decision sent from the page: ``step_id`` of the held call, ``approve`` or not,
    edited ``arguments`` (JSON text, None: as asked), a denial's ``reason`` and
    ``always`` (allow the tool for the rest of the chat)."""

    step_id: int
    approve: bool
    arguments: str | None = None
    reason: str = ""
    always: bool = False


@dataclass(frozen=True)
class DecisionShown:
    """A decision stored: the card every tab is sent, and the run to resume (None while
    another of its calls still waits)."""

    html: str
    run_id: int | None


def decide(
    frame: DecisionFrame, *, conversation_id: int, user: Any,
    tools_of: Callable[[str], Sequence[Any]],
) -> DecisionShown:  # fmt: skip
    """Store the decision of ``frame`` (sync); return the card and whether to resume.

    The socket's user is the conversation's owner (only the owner's sockets join it).
    ``tools_of(agent_key)``: the tools of the run's agent, whose schemas check edited
    arguments (``chat.catalog.code_tools_for``; an MCP server's tool is not among them, and takes
    any object, as a tool no longer defined does).
    Raises :class:`chat.store.ApprovalRefused` for a step that is not a held call of
    this conversation, one decided already, or edited arguments its tool refuses.
    """
    arguments = None
    if frame.approve and frame.arguments is not None:
        step = store.step_of_conversation(conversation_id=conversation_id, step_id=frame.step_id)
        tools = tools_of(step.run.agent_key) if step is not None else ()
        if step is None:
            raise store.ApprovalRefused(store.approvals.NOT_A_HELD_CALL)
        if isinstance(step.arguments, str) and frame.arguments.strip() == step.arguments.strip():
            # A text strategy's one-string input ("Suzhou"), which the card shows as it
            # is, sent back unchanged: not JSON, yet approved as asked.
            arguments = None
        else:
            arguments = checked_arguments(step.tool_name, frame.arguments, tools)
        if arguments == step.arguments:
            arguments = None  # unchanged: approved as asked
        elif len(frame.arguments) > MAX_ARGUMENTS_CHARS:
            # Edits only: the card sends the arguments with every decision, and a model's
            # call may well have asked for more (Daphne's 1 MiB frame limit bounds those).
            raise store.ApprovalRefused(ARGUMENTS_TOO_LONG.format(limit=MAX_ARGUMENTS_CHARS))
    decided = store.approval_decide(
        conversation_id=conversation_id, step_id=frame.step_id,
        outcome=Outcome.APPROVED if frame.approve else Outcome.DENIED, by=user, at=utcnow(),
        edited_arguments=arguments, reason="" if frame.approve else frame.reason,
        always=frame.approve and frame.always,
    )  # fmt: skip
    step = store.step_for_card(step_id=frame.step_id)
    html = fragments.step_replaced(step)
    return DecisionShown(html=html, run_id=decided.approval.run_id if decided.run_ready else None)
