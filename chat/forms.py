"""Forms: how a conversation's runs ask for tools (its strategy and native options)."""

from __future__ import annotations

from collections.abc import Sequence

from django import forms

from chat.models import TOOL_CHOICE_AUTO, TOOL_CHOICE_REQUIRED, Strategy


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
    The native options are ignored (reset to their defaults) for the text strategies.
    """

    strategy = forms.ChoiceField(choices=Strategy.choices, initial=Strategy.TOOL_CALLING)
    tool_choice = forms.ChoiceField(initial=TOOL_CHOICE_AUTO, required=False)
    parallel_tool_calls = forms.BooleanField(required=False, initial=True)

    def __init__(self, *args: object, tool_names: Sequence[str], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fields["tool_choice"].choices = tool_choice_choices(tool_names)  # type: ignore[attr-defined]

    def clean(self) -> dict[str, object]:
        """Return the cleaned values, native options at their defaults for text ones."""
        data = super().clean() or {}
        if data.get("strategy") and data["strategy"] != Strategy.TOOL_CALLING:
            data["tool_choice"] = TOOL_CHOICE_AUTO
            data["parallel_tool_calls"] = True
        elif not data.get("tool_choice"):
            data["tool_choice"] = TOOL_CHOICE_AUTO
        return data
