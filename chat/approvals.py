"""People in the loop on the Django side: each tool's policy, checking a decision, and
resuming the runs that waited for one.

The loop (:mod:`agents.approvals`) holds a call to an ``ask`` tool and pauses its run;
this module says which tools those are (:func:`policy_lookup`: ``AGENT_TOOL_POLICIES``,
overridden per tool by staff in the admin, and the conversation's "always allow"
grants), and validates and stores a decision from the chat's card (:func:`decide`, with
:class:`chat.forms.DecisionForm`, which the admin's actions use too); the run goes on in
whichever process claims it first (:func:`chat.runs.resume_ready`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from django.conf import settings

from agents.approvals import Outcome, PolicyLookup, ToolPolicy
from agents.events import utcnow
from chat import fragments, store
from chat.forms import DecisionForm, HeldCall

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


@dataclass(frozen=True)
class DecisionShown:
    """A decision stored: the card every tab is sent, and the run to resume (None while
    another of its calls still waits)."""

    html: str
    run_id: int | None


def decide(
    *, step_id: int, data: Mapping[str, Any], conversation_id: int, user: Any,
    tools_of: Callable[[str], Sequence[Any]],
) -> DecisionShown:  # fmt: skip
    """Validate a decision on the held call of step ``step_id`` and store it (sync);
    return the card and whether to resume.

    ``data`` is :class:`chat.forms.DecisionForm`'s (``decision``, ``arguments``,
    ``reason``, ``always``). The socket's user is the conversation's owner (only the
    owner's sockets join it). ``tools_of(agent_key)``: the tools of the run's agent, whose
    schemas check edited arguments (``chat.catalog.code_tools_for``; an MCP server's tool
    is not among them, and takes any object, as a tool no longer defined does).
    Raises :class:`chat.store.ApprovalRefused` for what the form refuses, a step that is
    not a held call of this conversation, or one decided already.
    """

    def held() -> HeldCall | None:
        step = store.step_of_conversation(conversation_id=conversation_id, step_id=step_id)
        if step is None:
            return None
        return HeldCall(step.tool_name, step.arguments, tools_of(step.run.agent_key))

    form = DecisionForm(data, held=held)
    if not form.is_valid():
        raise store.ApprovalRefused(form.refusal())
    decision = form.cleaned_data
    decided = store.approval_decide(
        conversation_id=conversation_id, step_id=step_id,
        outcome=Outcome.APPROVED if decision["approve"] else Outcome.DENIED, by=user,
        at=utcnow(), edited_arguments=decision["arguments"], reason=decision["reason"],
        always=decision["always"],
    )  # fmt: skip
    step = store.step_for_card(step_id=step_id)
    html = fragments.step_replaced(step)
    return DecisionShown(html=html, run_id=decided.approval.run_id if decided.run_ready else None)
