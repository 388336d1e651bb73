"""The shape of a provider entry and of the model settings it is built from.

No Django and no provider SDK here: an entry names its factory, which imports the SDK
only when a model is built, so ``agents`` stays importable with nothing configured.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import TYPE_CHECKING, NamedTuple
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel


@dataclass(frozen=True)
class ModelConfig:
    """What to build: ``provider`` (a registered entry's name), model name and options.

    ``timeout_s`` is the HTTP timeout of one request; ``max_retries`` the client's retry
    count; ``token_delay_s`` only affects the demo model (a pause between streamed chunks);
    ``context_window`` the model's context in tokens (0: its provider entry's
    ``context_window``), which requests are trimmed to fit (:mod:`agents.context`).
    Which fields a provider needs is its entry's ``requires``.
    """

    provider: str = "demo"
    model: str = ""
    base_url: str = ""
    api_key: str = ""
    temperature: float | None = None
    timeout_s: float = 60.0
    max_retries: int = 2
    token_delay_s: float = 0.0
    context_window: int = 0


class TokenUsage(StrEnum):
    """Where a provider's token counts come from."""

    REPORTED = "reported"  # the server counts them and says so
    ESTIMATED = "estimated"  # the model guesses (the demo: characters / 4)
    NONE = "none"  # no counts at all


@dataclass(frozen=True)
class Capabilities:
    """What a provider can do, as the app relies on it.

    ``usage``: where token counts come from (the page marks estimated ones);
    ``native_tool_calls``: the API takes tools and returns ``tool_calls`` (otherwise only
    the text strategies work); ``streaming_usage``: counts arrive in the stream (OpenAI's
    ``stream_options.include_usage``), so a streamed turn still has them.
    """

    usage: TokenUsage
    native_tool_calls: bool
    streaming_usage: bool


@dataclass(frozen=True)
class Quirks:
    """How a provider's server bends the chat-completions protocol: what it sends, what it refuses.

    One profile per entry, so a provider's workarounds live in one place; each flag has a
    test. ``text_tool_calls``: tool calls may arrive written into the content as markup
    (Hermes/Qwen ``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` and its kin)
    when the server's tool parser is off; the native strategy reads them as tool calls.
    """

    text_tool_calls: bool = False


class Required(NamedTuple):
    """A :class:`ModelConfig` field a provider cannot do without, and the setting behind it."""

    field: str  # e.g. "api_key"
    setting: str  # the environment variable that fills it, e.g. "OPENAI_API_KEY"


@dataclass(frozen=True)
class ProviderEntry:
    """One model provider: how to build its chat model, what it needs, what it can do.

    ``name`` is what ``AGENT_PROVIDER`` and stored runs say; ``label`` the provider for
    people. ``factory`` builds the LangChain chat model from a config whose ``requires``
    are filled (it imports its SDK itself, when called). ``fixed_model_name`` is the model
    name runs record whatever the settings say (blank: the configured model);
    ``fixed_model_label`` what the page header shows (blank: "<model> via <endpoint>",
    with ``default_endpoint`` when no base URL is set). ``scripted`` marks a stand-in
    that is not a language model, which the page header sets apart. ``quirks`` is the
    server's profile (:class:`Quirks`); ``context_window`` the model's context in tokens
    when the settings name none (prompts are trimmed to fit it).
    """

    name: str
    label: str
    factory: Callable[[ModelConfig], BaseChatModel]
    capabilities: Capabilities
    requires: tuple[Required, ...] = ()
    fixed_model_name: str = ""
    fixed_model_label: str = ""
    default_endpoint: str = ""
    scripted: bool = False
    quirks: Quirks = Quirks()
    context_window: int = 8_192

    def __post_init__(self) -> None:
        known = {f.name for f in fields(ModelConfig)}
        unknown = [req.field for req in self.requires if req.field not in known]
        if unknown:
            raise ValueError(f"Provider {self.name!r} requires unknown config fields {unknown}")

    def model_name(self, config: ModelConfig) -> str:
        """Return the model's name as runs record it."""
        return self.fixed_model_name or config.model

    def model_label(self, config: ModelConfig) -> str:
        """Return a one-line, human description of the model, as the page shows it.

        Every visitor sees it, so the endpoint is only its host and port: a base URL may
        carry credentials (``https://user:key@host/v1``) or a key in its query.
        """
        if self.fixed_model_label:
            return self.fixed_model_label
        where = urlsplit(config.base_url).netloc.rpartition("@")[2] if config.base_url else ""
        return f"{config.model} via {where or config.base_url or self.default_endpoint}"

    def missing_settings(self, config: ModelConfig) -> list[str]:
        """Return the settings ``config`` lacks for this provider, in ``requires`` order."""
        return [req.setting for req in self.requires if not getattr(config, req.field)]

    @property
    def usage_estimated(self) -> bool:
        """Return True when the token counts are the model's own estimate."""
        return self.capabilities.usage is TokenUsage.ESTIMATED
