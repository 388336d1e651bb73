"""Retry, regenerate and edit-and-rerun: another take of an earlier run, checked against
what its conversation's agent allows, then stored (:func:`chat.store.run_branch`).

A regenerate may pick another model or strategy of those the agent allows (docs/agents.md,
docs/models.md); the new run records it, and the conversation keeps its own: the next
question asked on that branch uses the conversation's model and strategy again, as
ChatGPT's "try again with another model" does (docs/branches.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from agents.events import utcnow
from chat import catalog, store
from chat.agents import allowed_models, find_agent
from chat.models import AgentRun, BranchKind, Conversation, Strategy

BAD_MODEL = (
    "This chat's agent cannot use the model {model!r}: pick one it offers. Nothing was started."
)
BAD_STRATEGY = (
    "This chat's agent cannot use the strategy {strategy!r}: pick one it offers. "
    "Nothing was started."
)


@dataclass(frozen=True)
class BranchOptions:
    """The models and strategies a regenerate of a conversation's run may pick, as
    ``(key, label)`` pairs, the conversation's own first."""

    models: list[tuple[str, str]]
    strategies: list[tuple[str, str]]

    @property
    def offers_choice(self) -> bool:
        """Return True when there is something to pick: more than one model or strategy."""
        return len(self.models) > 1 or len(self.strategies) > 1


def branch_options(conversation: Conversation) -> BranchOptions:
    """Return what a regenerate of ``conversation``'s runs may pick (reads settings only).

    The configured models its agent may use and the strategies it allows (all four when
    it names none), and the conversation's own always; an agent no longer configured
    allows only the conversation's own.
    """
    agent = find_agent(conversation.agent_key)
    if agent is None:
        own = [(conversation.model_key, conversation.model_key)]
        return BranchOptions(own, [(conversation.strategy, conversation.get_strategy_display())])
    models = allowed_models(agent, catalog.model_choices())
    strategies = [
        (key, label) for key, label in Strategy.choices
        if not agent.strategies or key in agent.strategies
    ]  # fmt: skip
    # The chat's own always, first: the form sends the selects even folded, so a plain
    # Regenerate would otherwise run with another model or strategy than the chat's
    # when the agent no longer offers its own (its next question still uses them).
    if conversation.model_key not in dict(models):
        models.insert(0, (conversation.model_key, conversation.model_key))
    if conversation.strategy not in dict(strategies):
        strategies.insert(0, (conversation.strategy, conversation.get_strategy_display()))
    models.sort(key=lambda pair: pair[0] != conversation.model_key)
    strategies.sort(key=lambda pair: pair[0] != conversation.strategy)
    return BranchOptions(models, strategies)


def create_branch(
    *,
    conversation_id: int,
    run_id: int,
    kind: BranchKind,
    model: str = "",
    strategy: str = "",
    content: str = "",
    rate_limited: bool = False,
) -> AgentRun:
    """Store another take of run ``run_id`` (sync) and return its new running run.

    ``model`` and ``strategy`` ("": the conversation's) must be ones its agent allows
    (:func:`branch_options`); ``content`` is an edit's new question. Raises
    :class:`chat.store.BranchRefused` for a model or strategy not allowed and for what
    :func:`chat.store.run_branch` refuses, which also raises ``ConversationGone``,
    ``RunWaiting`` / ``RunAlreadyGoing`` and (``rate_limited``) ``RateLimited``.
    """
    conversation = Conversation.objects.filter(pk=conversation_id).first()
    if conversation is None:  # removed outright (it had no message) while a tab was open
        raise store.ConversationGone(conversation_id)
    options = branch_options(conversation)
    if model and model not in dict(options.models):
        raise store.BranchRefused(BAD_MODEL.format(model=model[:60]))
    if strategy and strategy not in dict(options.strategies):
        raise store.BranchRefused(BAD_STRATEGY.format(strategy=strategy[:60]))
    limit = settings.CHAT_RUNS_PER_MINUTE if rate_limited else 0
    return store.run_branch(
        conversation_id=conversation_id, run_id=run_id, kind=kind,
        choice=store.BranchChoice(model_key=model, strategy=strategy, content=content),
        started_at=utcnow(), runs_per_minute=limit or None,
        model_of=catalog.model_provenance, agent_of=catalog.agent_name_for,
    )  # fmt: skip
