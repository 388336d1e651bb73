"""Forms: a conversation's model, how its runs ask for tools (strategy, native options),
its title, a decision on a held tool call, and feedback on an answer."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django import forms
from pydantic import ValidationError as SchemaError

from agents.sentences import clause
from agents.tool_calls import schema_errors
from chat.models import (
    TOOL_CHOICE_AUTO,
    TOOL_CHOICE_REQUIRED,
    Conversation,
    Feedback,
    FeedbackRating,
    Strategy,
)
from chat.store.approvals import NOT_A_HELD_CALL
from chat.validation import unstorable

MAX_REASON_CHARS = 1_000
MAX_ARGUMENTS_CHARS = 20_000
REASON_TOO_LONG = "The reason is too long: at most {limit:,} characters."
UNSTORABLE = "The decision contains characters that cannot be stored ({what}). Nothing was decided."
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
# A rating that takes the feedback back (rating and comment): the pressed thumb again.
RATING_NONE = "none"
BAD_RATING = "A rating is 'up', 'down' or 'none' (to take it back). No feedback was saved."
COMMENT_TOO_LONG = (
    "Your comment is %(show_value)d characters long; the limit is %(limit_value)d. It was "
    "not saved: shorten it and save again."
)
COMMENT_UNSTORABLE = (
    "The comment contains characters that cannot be stored ({what}). It was not saved."
)
NOTHING_GIVEN = "Feedback needs a 'rating' or a 'comment'. No feedback was saved."
COMMENT_WITHOUT_FEEDBACK = (
    "Taking feedback back ('rating': 'none') removes its comment too: send the comment "
    "with a thumbs up or down. Nothing was changed."
)


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
        # CharField gives its widget a maxlength, which means nothing on a <select>.
        self.fields["tool_choice"].widget.attrs.pop("maxlength", None)
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


class StorableCharField(forms.CharField):
    """A ``CharField`` that refuses text no database stores (a NUL character, an unpaired
    UTF-16 surrogate: :func:`chat.validation.unstorable`) with :data:`UNSTORABLE`."""

    def validate(self, value: Any) -> None:
        super().validate(value)
        bad = unstorable(value)
        if bad is not None:
            raise forms.ValidationError(UNSTORABLE.format(what=bad), code="unstorable")


class ReasonField(StorableCharField):
    """A denial's reason: one line, its runs of white space (line breaks too) made one
    space before its length is checked."""

    def to_python(self, value: Any) -> str:
        return " ".join(super().to_python(value).split())


@dataclass(frozen=True)
class HeldCall:
    """What edited arguments are checked against: the held call's ``tool_name``, the
    ``arguments`` the model asked for (a dict, or a text strategy's one string) and the
    ``tools`` of its run's agent (an MCP server's tools are not among them)."""

    tool_name: str
    arguments: Any
    tools: Sequence[Any]


class DecisionForm(forms.Form):
    """Validate a decision on a held tool call, from the chat's card (the socket) or the
    admin's actions: the same limits and messages for both.

    ``held`` returns the held call (None: the step is not one), called only when an
    approval carries edited arguments to check. Cleaned: ``approve`` (bool),
    ``arguments`` (the edited arguments as a dict, None when absent or as the model asked),
    ``reason`` (a denial's, white space collapsed, "" for an approval) and ``always``
    (False for a denial). :meth:`refusal` is the first error, for the person.
    """

    decision = forms.ChoiceField(choices=(("approve", "Approve"), ("deny", "Deny")))
    reason = ReasonField(
        required=False,
        max_length=MAX_REASON_CHARS,
        error_messages={"max_length": REASON_TOO_LONG.format(limit=MAX_REASON_CHARS)},
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
    )
    arguments = StorableCharField(required=False, strip=False)
    always = forms.BooleanField(required=False)

    def __init__(
        self, *args: Any, held: Callable[[], HeldCall | None] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.held = held

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        approve = data.get("decision") == "approve"
        text = data.get("arguments") or ""
        data["approve"] = approve
        data["arguments"] = None
        if not approve:
            data["always"] = False
        else:
            data["reason"] = ""
            if text.strip() and not self.errors:  # no lookup for a decision refused already
                try:
                    data["arguments"] = self._edited(text)
                except forms.ValidationError as exc:
                    self.add_error("arguments", exc)
        return data

    def _edited(self, text: str) -> dict[str, Any] | None:
        """Return the edited arguments ``text`` once the held call's tool accepts them,
        or None when they are the model's own; raise ``ValidationError`` otherwise."""
        held = self.held() if self.held is not None else None
        if held is None:
            raise forms.ValidationError(NOT_A_HELD_CALL)
        if isinstance(held.arguments, str) and text.strip() == held.arguments.strip():
            # A text strategy's one-string input ("Suzhou"), which the card shows as it
            # is, sent back unchanged: not JSON, yet approved as asked.
            return None
        value = checked_arguments(held.tool_name, text, held.tools)
        if value == held.arguments:
            return None  # unchanged: approved as asked
        if len(text) > MAX_ARGUMENTS_CHARS:
            # Edits only: the card sends the arguments with every decision, and a model's
            # call may well have asked for more (Daphne's 1 MiB frame limit bounds those).
            raise forms.ValidationError(ARGUMENTS_TOO_LONG.format(limit=MAX_ARGUMENTS_CHARS))
        return value

    def refusal(self) -> str:
        """Return the first error of a form that is not valid ("" for a valid one)."""
        for errors in self.errors.values():
            return str(errors[0])
        return ""


def checked_arguments(tool_name: str, text: str, tools: Sequence[Any]) -> dict[str, Any]:
    """Return the edited arguments ``text`` (JSON) for ``tool_name`` once its schema
    accepts them (the arguments stored are the JSON as given, not the schema's
    coerced values).

    Raises ``ValidationError`` with what is wrong: not JSON, not an object, characters
    no database stores, or not what the tool's ``args_schema`` accepts (a tool no longer
    registered takes any object).
    """
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except ValueError as exc:
        raise forms.ValidationError(ARGUMENTS_NOT_JSON.format(error=clause(exc))) from None
    except RecursionError:
        raise forms.ValidationError(ARGUMENTS_TOO_DEEP) from None
    if not isinstance(value, dict):
        raise forms.ValidationError(ARGUMENTS_NOT_OBJECT)
    bad = _unstorable_in(value)  # JSON escapes (\\u0000, \\ud800) parse into such text
    if bad is not None:
        raise forms.ValidationError(ARGUMENTS_UNSTORABLE.format(what=bad))
    tool = next((t for t in tools if t.name == tool_name), None)
    schema = getattr(tool, "args_schema", None)
    if schema is not None and hasattr(schema, "model_validate"):
        try:
            schema.model_validate(value)
        except SchemaError as exc:
            error = schema_errors(exc)
            message = ARGUMENTS_INVALID.format(name=tool_name, error=clause(error))
            raise forms.ValidationError(message) from None
    return value


def _refuse_constant(name: str) -> Any:
    """Refuse JSON's non-standard ``NaN``, ``Infinity`` and ``-Infinity``, which Python
    reads but PostgreSQL's ``jsonb`` refuses (RFC 8259 has no such values)."""
    raise ValueError(f"{name} is not a JSON value")


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


class CommentField(forms.CharField):
    """A comment on an answer: refuses text no database stores with its own message."""

    def validate(self, value: Any) -> None:
        super().validate(value)
        bad = unstorable(value)
        if bad is not None:
            raise forms.ValidationError(COMMENT_UNSTORABLE.format(what=bad), code="unstorable")


class FeedbackForm(forms.Form):
    """Validate a change to the feedback on an answer: a rating, a comment, or both.

    ``rating``: "up", "down", or "none" (take the feedback back: rating and comment);
    ``comment``: the whole comment, trimmed, at most ``Feedback.COMMENT_MAX_CHARS``
    characters ("" clears it). A field left out of the data is left as stored: cleaned
    to None. :meth:`refusal` is the first error, for the person.
    """

    rating = forms.ChoiceField(
        required=False,
        choices=[("", ""), *FeedbackRating.choices, (RATING_NONE, "None")],
        error_messages={"invalid_choice": BAD_RATING},
    )
    comment = CommentField(
        required=False,
        max_length=Feedback.COMMENT_MAX_CHARS,
        error_messages={"max_length": COMMENT_TOO_LONG},
        widget=forms.Textarea(attrs={"rows": 2}),
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if "comment" not in self.data:
            data["comment"] = None
        if not self.data.get("rating"):
            data["rating"] = None
        if data.get("rating") is None and data.get("comment") is None and not self.errors:
            raise forms.ValidationError(NOTHING_GIVEN)
        if data.get("rating") == RATING_NONE and data.get("comment"):
            # The comment would be dropped unsaid with the row it belongs to.
            raise forms.ValidationError(COMMENT_WITHOUT_FEEDBACK)
        return data

    def refusal(self) -> str:
        """Return the first error of a form that is not valid ("" for a valid one)."""
        for errors in self.errors.values():
            return str(errors[0])
        return ""
