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

from agents.providers.call_ids import STYLES

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel


# Tokens of context assumed for a model whose entry and settings name none.
DEFAULT_CONTEXT_WINDOW = 8_192


@dataclass(frozen=True)
class ModelConfig:
    """What to build: ``provider`` (an entry's name), model name and options.

    ``timeout_s`` is the HTTP timeout of one request; ``max_retries`` the client's retry
    count; ``token_delay_s`` only affects the demo model (a pause between streamed chunks).
    ``max_tokens`` caps one reply's output in tokens (0: the server's own default), so a
    local model that loses its way cannot stream until the turn's time limit;
    ``context_window`` is the model's context in tokens (0: its provider entry's
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
    max_tokens: int = 0
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
    test (``tests/agents/test_provider_quirks.py``), and
    :class:`agents.providers.compatible.CompatibleChatOpenAI` applies them.

    - ``text_tool_calls``: tool calls may arrive written into the content as markup
      (Hermes/Qwen ``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` and its kin)
      when the server's tool parser is off; the native strategy reads them as tool calls.
    - ``send_reasoning_content``: the server needs each assistant message's reasoning
      (``additional_kwargs["reasoning_content"]``) sent back as ``reasoning_content`` in
      later requests: DeepSeek's thinking mode answers HTTP 400 "Missing
      reasoning_content" otherwise. Off, it is never sent (a strict server may reject a
      field it does not know).
    - ``empty_content_with_tool_calls``: send an assistant message that has tool calls
      and no text with ``content: ""``, not the ``null`` OpenAI documents (llama.cpp's
      server answers HTTP 500 to ``null``).
    - ``max_tokens_field``: the request field carrying ``ModelConfig.max_tokens``:
      ``"max_completion_tokens"`` (OpenAI's current name, what langchain-openai sends) or
      ``"max_tokens"`` (what llama.cpp, Ollama, LM Studio, DashScope and DeepSeek read;
      llama.cpp ignores the other, so its output is not capped).
    - ``tool_call_ids``: the form of the tool-call ids sent
      (:data:`agents.providers.call_ids.STYLES`): ``"portable"`` (at most 40 letters,
      digits, ``_`` and ``-``, what OpenAI and the others take) or ``"alnum9"`` (nine
      letters and digits, all Mistral takes). Ids of another form, or repeated within a
      request, are rewritten in the request only, each call still paired with its result.

    What no conforming server sends is repaired for every entry and needs no flag (see
    :mod:`agents.providers.compatible`): tool-call arguments as a JSON object, a tool
    name repeated on every chunk of one call, reasoning as ``delta.reasoning``.
    """

    text_tool_calls: bool = False
    send_reasoning_content: bool = False
    empty_content_with_tool_calls: bool = False
    max_tokens_field: str = "max_completion_tokens"
    tool_call_ids: str = "portable"

    def __post_init__(self) -> None:
        if self.max_tokens_field not in MAX_TOKENS_FIELDS:
            raise ValueError(
                f"max_tokens_field is one of {MAX_TOKENS_FIELDS}, not {self.max_tokens_field!r}"
            )
        if self.tool_call_ids not in STYLES:
            raise ValueError(
                f"tool_call_ids is one of {sorted(STYLES)}, not {self.tool_call_ids!r}"
            )


MAX_TOKENS_FIELDS = ("max_completion_tokens", "max_tokens")


class Required(NamedTuple):
    """A :class:`ModelConfig` field a provider cannot do without, and the setting behind it."""

    field: str  # e.g. "api_key"
    setting: str  # the environment variable that fills it, e.g. "OPENAI_API_KEY"


@dataclass(frozen=True)
class ProviderEntry:
    """One model provider: how to build its chat model, what it needs, what it can do.

    ``name`` is what ``AGENT_PROVIDER`` and stored runs say; ``label`` the provider for
    people. ``factory(config, entry)`` builds the LangChain chat model from a config whose
    ``requires`` are filled, given this entry (its defaults and quirks); it imports its
    SDK itself, when called. ``fixed_model_name`` is the model
    name runs record whatever the settings say (blank: the configured model);
    ``fixed_model_label`` what the page header shows (blank: "<model> via <endpoint>",
    with ``default_endpoint`` when no base URL is set, else the host of
    ``default_base_url``). ``default_base_url`` is where the server is when the settings
    name none (``OPENAI_BASE_URL`` overrides it; blank: the SDK's own default, OpenAI);
    ``default_model`` the model settings use when ``OPENAI_MODEL`` is blank (blank: the
    setting is required, as ``requires`` says). ``scripted`` marks a stand-in
    that is not a language model, which the page header sets apart. ``quirks`` is the
    server's profile (:class:`Quirks`); ``context_window`` the model's context in tokens
    when the settings name none (prompts are trimmed to fit it).
    """

    name: str
    label: str
    factory: Callable[[ModelConfig, ProviderEntry], BaseChatModel]
    capabilities: Capabilities
    requires: tuple[Required, ...] = ()
    fixed_model_name: str = ""
    fixed_model_label: str = ""
    default_endpoint: str = ""
    default_base_url: str = ""
    default_model: str = ""
    scripted: bool = False
    quirks: Quirks = Quirks()
    context_window: int = DEFAULT_CONTEXT_WINDOW

    def __post_init__(self) -> None:
        known = {f.name for f in fields(ModelConfig)}
        unknown = [req.field for req in self.requires if req.field not in known]
        if unknown:
            raise ValueError(f"Provider {self.name!r} requires unknown config fields {unknown}")

    def model_name(self, config: ModelConfig) -> str:
        """Return the model's name as runs record it (the entry's default when blank)."""
        return self.fixed_model_name or config.model or self.default_model

    def model_label(self, config: ModelConfig) -> str:
        """Return a one-line, human description of the model, as the page shows it.

        Every visitor sees it, so the endpoint is only its host and port: a base URL may
        carry credentials (``https://user:key@host/v1``) or a key in its query.
        """
        if self.fixed_model_label:
            return self.fixed_model_label
        where = urlsplit(config.base_url).netloc.rpartition("@")[2] if config.base_url else ""
        default = self.default_endpoint or urlsplit(self.default_base_url).netloc
        return f"{self.model_name(config)} via {where or config.base_url or default}"

    def base_url(self, config: ModelConfig) -> str:
        """Return the server's base URL: the configured one, else the entry's default."""
        return config.base_url or self.default_base_url

    def missing_settings(self, config: ModelConfig) -> list[str]:
        """Return the settings ``config`` lacks for this provider, in ``requires`` order."""
        return [req.setting for req in self.requires if not getattr(config, req.field)]

    @property
    def usage_estimated(self) -> bool:
        """Return True when the token counts are the model's own estimate."""
        return self.capabilities.usage is TokenUsage.ESTIMATED
