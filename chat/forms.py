"""Forms: a conversation's model, and how its runs ask for tools (strategy, native options)."""

from __future__ import annotations

from collections.abc import Sequence

from django import forms

from chat.models import TOOL_CHOICE_AUTO, TOOL_CHOICE_REQUIRED, Conversation, Strategy


def tool_choice_choices(tool_names: Sequence[str]) -> list[tuple[str, str]]:
    """Return the ``tool_choice`` options: auto, required, then one per tool name."""
    return [
        (TOOL_CHOICE_AUTO, "auto"),
        (TOOL_CHOICE_REQUIRED, "required"),
        *((name, f"first {name}") for name in tool_names),
    ]


class StrategyForm(forms.Form):
    """Validate a conversation's agent, model, strategy, ``tool_choice`` and parallel tool
    calls.

    ``tool_names`` are the tools runs may call (a named ``tool_choice`` must be one);
    ``models`` the models the agent may use as ``(key, label)`` pairs
    (``chat.catalog.model_choices``), the first being the default; ``agents`` the defined
    agents as ``(name, label)``; ``strategies`` the strategies the agent allows (empty:
    all four). ``agent`` and ``model`` may be left out (the picker has no menu when only
    one is defined): the cleaned ``agent_key`` is then ``default_agent``, the cleaned
    ``model_key`` ``default_model`` or the first configured key. The native options are
    only read for native tool calling; for a text strategy they are ignored and set to
    their defaults.
    """

    agent = forms.ChoiceField(required=False, widget=forms.Select(attrs={"id": "agent-select"}))
    model = forms.ChoiceField(required=False, widget=forms.Select(attrs={"id": "model-select"}))

    strategy = forms.ChoiceField(
        choices=Strategy.choices,
        initial=Strategy.TOOL_CALLING,
        widget=forms.Select(attrs={"id": "strategy-select"}),
    )
    tool_choice = forms.CharField(
        required=False, max_length=200, widget=forms.Select(attrs={"id": "tool-choice-select"})
    )
    parallel_tool_calls = forms.BooleanField(
        required=False,
        initial=True,
        widget=forms.CheckboxInput(attrs={"id": "parallel-tool-calls"}),
    )

    def __init__(
        self,
        *args: object,
        tool_names: Sequence[str],
        models: Sequence[tuple[str, str]],
        default_model: str = "",
        agents: Sequence[tuple[str, str]] = (),
        default_agent: str = "",
        strategies: Sequence[str] = (),
        **kwargs: object,
    ) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        choices = tool_choice_choices(tool_names)
        self.tool_choices = dict(choices)
        self.fields["tool_choice"].widget.choices = choices  # type: ignore[attr-defined]
        self.fields["model"].choices = list(models)  # type: ignore[attr-defined]
        keys = [key for key, _ in models]
        self.default_model = default_model if default_model in keys else next(iter(keys), "")
        self.fields["agent"].choices = list(agents)  # type: ignore[attr-defined]
        self.default_agent = default_agent
        if strategies:
            allowed = [(key, label) for key, label in Strategy.choices if key in strategies]
            self.fields["strategy"].choices = allowed  # type: ignore[attr-defined]

    @property
    def offers_agents(self) -> bool:
        """Return True when there is an agent to pick: more than one is defined."""
        return len(self.fields["agent"].choices) > 1  # type: ignore[attr-defined]

    @property
    def offers_models(self) -> bool:
        """Return True when there is a model to pick: more than one is configured."""
        return len(self.fields["model"].choices) > 1  # type: ignore[attr-defined]

    @classmethod
    def of(
        cls,
        conversation: Conversation,
        *,
        tool_names: Sequence[str],
        models: Sequence[tuple[str, str]],
        agents: Sequence[tuple[str, str]] = (),
        strategies: Sequence[str] = (),
    ) -> StrategyForm:
        """Return an unbound form showing ``conversation``'s settings (the picker).

        A model key that is no longer configured is shown as a blank first choice, so
        picking any configured model is a change the page sends.
        """
        picked = conversation.model_key
        if picked not in dict(models):
            models = [("", f"{picked} (no longer configured)"), *models]
            picked = ""
        initial = {
            "agent": conversation.agent_key or next(iter(dict(agents)), ""),
            "model": picked,
            "strategy": conversation.strategy,
            "tool_choice": conversation.tool_choice,
            "parallel_tool_calls": conversation.parallel_tool_calls,
        }
        return cls(initial=initial, tool_names=tool_names, models=models, agents=agents,
                   strategies=strategies)  # fmt: skip

    def clean(self) -> dict[str, object]:
        """Return the cleaned values: ``model_key``, the strategy and its native options.

        Native options are at their defaults for text strategies. Raises
        ``ValidationError`` (on ``tool_choice``) for a choice that is neither ``auto``,
        ``required`` nor a tool's name, under native tool calling, and (on ``model``) for
        a model that is not configured.
        """
        data = super().clean() or {}
        data["model_key"] = data.pop("model", "") or self.default_model
        data["agent_key"] = data.pop("agent", "") or self.default_agent
        if data.get("strategy") != Strategy.TOOL_CALLING:
            data["tool_choice"] = TOOL_CHOICE_AUTO
            data["parallel_tool_calls"] = True
            return data
        choice = data.get("tool_choice") or TOOL_CHOICE_AUTO
        if choice not in self.tool_choices:
            self.add_error(
                "tool_choice",
                f"Select a valid choice. {choice[:80]} is not one of the available choices.",
            )
        data["tool_choice"] = choice
        return data


class ConversationTitleForm(forms.Form):
    """Validate a conversation's new title: one line, 1 to 200 characters once trimmed."""

    title = forms.CharField(
        max_length=200,
        error_messages={
            "required": "A title needs at least one character.",
            "max_length": (
                "A title has at most %(limit_value)d characters (this has %(show_value)d)."
            ),
        },
    )

    def clean_title(self) -> str:
        """Return the title with its spaces and line breaks collapsed to single spaces."""
        return " ".join(self.cleaned_data["title"].split())
