"""Forms: how a conversation's runs ask for tools (its strategy and native options)."""

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
    """Validate a conversation's strategy, ``tool_choice`` and parallel tool calls.

    ``tool_names`` are the tools runs may call (a named ``tool_choice`` must be one).
    The native options are only read for native tool calling; for a text strategy they
    are ignored and set to their defaults.
    """

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

    def __init__(self, *args: object, tool_names: Sequence[str], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        choices = tool_choice_choices(tool_names)
        self.tool_choices = dict(choices)
        self.fields["tool_choice"].widget.choices = choices  # type: ignore[attr-defined]

    @classmethod
    def of(cls, conversation: Conversation, *, tool_names: Sequence[str]) -> StrategyForm:
        """Return an unbound form showing ``conversation``'s settings (the picker)."""
        initial = {
            "strategy": conversation.strategy,
            "tool_choice": conversation.tool_choice,
            "parallel_tool_calls": conversation.parallel_tool_calls,
        }
        return cls(initial=initial, tool_names=tool_names)

    def clean(self) -> dict[str, object]:
        """Return the cleaned values, native options at their defaults for text ones.

        Raises ``ValidationError`` (on ``tool_choice``) for a choice that is neither
        ``auto``, ``required`` nor a tool's name, under native tool calling.
        """
        data = super().clean() or {}
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
