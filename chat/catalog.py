"""The model catalog: the models a conversation can pick, and what a run is given.

One word per idea:

- **model config** (:class:`agents.providers.ModelConfig`): how to reach and drive one
  model (provider, model name, base URL, key, client options). The primary one is
  ``settings.AGENT_MODEL``.
- **configured model** (:class:`agents.configured_models.ConfiguredModel`): one model a
  conversation can pick: a **model key** (stored on the conversation), a label and a
  model config. The catalog is the list of them (:func:`configured_models`).
- **model provenance** (:class:`chat.store.ModelProvenance`): what a run stores of the
  model it used (provider, model name, host), read back even when the model is gone.
- **chat model** (LangChain's ``BaseChatModel``): the object a run talks to, built from
  a model config (:func:`chat_model_for`).
- **model badge** (:class:`ModelBadge`): the line a page header names a model with.

Also what a run is given besides its chat model: its agent's tools from code, its
limits, its strategy and its context window. Reads settings; no database access but
through the run row it is handed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from functools import partial
from typing import TYPE_CHECKING

from django.conf import settings
from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool

from agents import configured_models as catalog_file
from agents.configured_models import PRIMARY_KEY, ConfiguredModel, endpoint_of
from agents.context import ContextWindow
from agents.providers import ModelConfig, build_model, find_provider
from agents.providers.base import DEFAULT_CONTEXT_WINDOW
from agents.runtime import RunLimits
from agents.stopping import Budget
from agents.strategies import Strategy, StrategyOptions, get_strategy
from chat import store
from chat.agents import code_tools, find_agent
from chat.pricing import PriceRow, cost_of

if TYPE_CHECKING:
    from chat.models import AgentRun

NOT_CONFIGURED = (
    "this conversation's model {key!r} is no longer configured on this server (it has: "
    "{keys}). Pick another in the Model menu at the top of the chat (reload the page if "
    "it is not there) and send your message again (from a terminal: ask --conversation "
    "ID --model KEY)."
)


def primary_model_config() -> ModelConfig:
    """Return the primary model's config (``settings.AGENT_MODEL``: AGENT_PROVIDER, OPENAI_*)."""
    return settings.AGENT_MODEL


def configured_models() -> list[ConfiguredModel]:
    """Return the models a conversation can pick: the primary one (key ``default``), those
    of ``AGENT_MODELS_FILE``, then the offline demo unless ``AGENT_OFFER_DEMO`` is off."""
    return catalog_file.configured_models(
        primary_model_config(), settings.AGENT_EXTRA_MODELS, offer_demo=settings.AGENT_OFFER_DEMO
    )


def find_configured_model(key: str) -> ConfiguredModel | None:
    """Return the configured model with ``key``, or None when there is none (any more)."""
    return next((model for model in configured_models() if model.key == key), None)


def model_choices() -> list[tuple[str, str]]:
    """Return ``(key, label)`` of every configured model, as the picker offers them."""
    return [
        (model.key, model.display_label(find_provider(model.config.provider)))
        for model in configured_models()
    ]


class ModelNotConfigured(ValueError):
    """A conversation's model key names no configured model (the configuration changed)."""


def conversation_model(model_key: str) -> ConfiguredModel:
    """Return the configured model a conversation's ``model_key`` names.

    Raises :class:`ModelNotConfigured` saying what to do when it is no longer configured.
    """
    model = find_configured_model(model_key)
    if model is None:
        keys = ", ".join(key for key, _ in model_choices())
        raise ModelNotConfigured(NOT_CONFIGURED.format(key=model_key, keys=keys))
    return model


def model_provenance(model_key: str) -> store.ModelProvenance:
    """Return what a run of the model ``model_key`` records: provider, model name, host.

    A key no longer configured is recorded with no provider and the key as its model
    name; such a run fails at once with :data:`NOT_CONFIGURED` (see :func:`chat_model_for`).
    """
    model = find_configured_model(model_key)
    if model is None:
        return store.ModelProvenance(provider="", model_name=model_key, endpoint="")
    entry = find_provider(model.config.provider)
    model_name = entry.model_name(model.config) if entry else model.config.model
    return store.ModelProvenance(
        provider=model.config.provider,
        model_name=model_name,
        endpoint=endpoint_of(model.config, entry),
    )


@dataclass(frozen=True)
class ModelBadge:
    """The model a page header names, and whether it is a scripted stand-in for one."""

    label: str
    scripted: bool


def model_badge(run: AgentRun | None = None, *, model_key: str | None = None) -> ModelBadge:
    """Return the header of a page: a configured model, or the model ``run`` used.

    With ``model_key``, the conversation's model (named "<key> (no longer configured)"
    when it is gone); with neither, the primary model. The label names the model, the
    host it is reached at and the provider ("deepseek-chat via api.deepseek.com ·
    DeepSeek"); a provider's fixed label stands alone. A run is named by its configured
    model when one matches what it recorded, else by its stored model name, host and
    provider (also one no longer registered).
    """
    if run is not None:
        for model in configured_models():
            if model_provenance(model.key) == (run.provider, run.model_name, run.endpoint):
                return _configured_badge(model)
        where = f" via {run.endpoint}" if run.endpoint else ""
        ran = run.provider_entry
        return ModelBadge(
            label=f"{run.model_name}{where} ({run.provider_label})",
            scripted=ran is not None and ran.scripted,
        )
    model = find_configured_model(PRIMARY_KEY if model_key is None else model_key)
    if model is None:
        return ModelBadge(label=f"{model_key} (no longer configured)", scripted=False)
    return _configured_badge(model)


def _configured_badge(model: ConfiguredModel) -> ModelBadge:
    entry = find_provider(model.config.provider)
    if entry is None:  # the system checks refuse this; a test's settings may not
        return ModelBadge(label=f"{model.key} ({model.config.provider}, not registered)",
                          scripted=False)  # fmt: skip
    label = model.display_label(entry)
    if not entry.fixed_model_label and entry.label not in label:
        label = f"{label} · {entry.label}"
    return ModelBadge(label=label, scripted=entry.scripted)


def chat_model_for(run: AgentRun | None = None) -> BaseChatModel:
    """Return the chat model for ``run``'s conversation (the primary model's without one).

    Tests replace this (``chat.catalog.chat_model_for``) to script the model. Raises
    :class:`ModelNotConfigured` when the conversation's model is no longer configured,
    and ``UnknownProvider`` or ``MissingSettings`` for a configuration the checks would
    refuse (all ``ValueError``s, which end the run as failed with the reason).
    """
    if run is None:
        return build_model(primary_model_config())
    return build_model(conversation_model(run_model_key(run)).config)


def run_model_key(run: AgentRun) -> str:
    """Return the key of the configured model ``run`` uses: the one a regenerate picked
    for it (``AgentRun.model_key``), else its conversation's."""
    return run.model_key or run.conversation.model_key


def agent_name_for(agent_key: str) -> str:
    """Return the name a run of a conversation with ``agent_key`` records: the agent's
    (blank is the default agent), or the key itself when no agent has it any more (the
    run then fails at once, saying so)."""
    agent = find_agent(agent_key)
    return agent.name if agent is not None else agent_key


def code_tools_for(agent_key: str = "") -> list[BaseTool]:
    """Return the tools from code of the agent ``agent_key`` names ("": the default
    agent; one no longer configured has none), with the bundled ones' simulated latency.

    Its MCP servers' tools are known only to a run (:func:`chat.agents.agent_tools`).
    """
    agent = find_agent(agent_key)
    return code_tools(agent) if agent is not None else []


def run_limits(price: PriceRow | None = None) -> RunLimits:
    """Return the run limits from settings; ``price`` (the run's model's, or None) prices
    its cost budget (``AGENT_MAX_RUN_COST``), which a model with no price does not have."""
    budget = Budget(
        max_tokens=settings.AGENT_MAX_RUN_TOKENS, max_cost=settings.AGENT_MAX_RUN_COST,
        cost=None if price is None else partial(_cost, price),
        currency=price.currency if price is not None else "",
    )  # fmt: skip
    return RunLimits(
        trim_intermediate_steps=settings.AGENT_TRIM_INTERMEDIATE_STEPS or -1,
        budget=budget,
        max_iterations=settings.AGENT_MAX_ITERATIONS,
        tool_timeout_s=settings.AGENT_TOOL_TIMEOUT_S,
        model_timeout_s=settings.AGENT_MODEL_TIMEOUT_S,
        max_observation_chars=settings.AGENT_MAX_OBSERVATION_CHARS,
        max_result_chars=settings.AGENT_MAX_RESULT_CHARS,
        max_execution_time_s=settings.AGENT_MAX_EXECUTION_TIME_S or None,
        early_stopping_method=settings.AGENT_EARLY_STOPPING_METHOD,
    )


def _cost(price: PriceRow, usage: Mapping[str, int]) -> Decimal | None:
    return cost_of(usage.get("input_tokens"), usage.get("output_tokens"), price)


def run_strategy(run_row: AgentRun) -> Strategy:
    """Return the strategy a stored run uses, with the options recorded on it.

    Whether tool-call markup in a native reply's text is read as tool calls comes from
    the run's provider entry (``Quirks.text_tool_calls``); a provider no longer registered
    reads none.
    """
    entry = run_row.provider_entry
    options = StrategyOptions(
        tool_choice=run_row.tool_choice or "auto",
        parallel_tool_calls=run_row.parallel_tool_calls is not False,
        text_tool_calls=entry is not None and entry.quirks.text_tool_calls,
    )
    return get_strategy(run_row.strategy, options)


def context_window(run: AgentRun) -> ContextWindow:
    """Return the context window of ``run``'s model (its ``AGENT_CONTEXT_TOKENS``).

    0 in the setting means the provider entry's ``context_window``. The room kept for
    the reply is the model's ``max_tokens`` (``AGENT_MAX_TOKENS``) when set, else a
    quarter of the window (at most 4,096 tokens; :class:`agents.context.ContextWindow`).
    Raises :class:`ModelNotConfigured` as :func:`chat_model_for` does.
    """
    config = conversation_model(run_model_key(run)).config
    entry = find_provider(config.provider)
    window = config.context_window or (entry.context_window if entry else 0)
    return ContextWindow(max_tokens=window or DEFAULT_CONTEXT_WINDOW,
                         reply_tokens=config.max_tokens)  # fmt: skip
