"""``python manage.py ask "question"``: run the agent headless and print its trace."""

from __future__ import annotations

import asyncio
import json
from typing import Any, TextIO

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser, OutputWrapper

from agents.configured_models import PRIMARY_KEY
from agents.definitions import AgentDefinition
from agents.events import (
    ApprovalRequested,
    ModelTurnFinished,
    ModelTurnStarted,
    ReasoningDelta,
    RunFinished,
    RunPaused,
    RunStarted,
    RunStatus,
    TextDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from chat import fragments, store
from chat.agents import agent_choices, agent_settings, allowed_models, find_agent
from chat.catalog import code_tools_for, model_badge, model_choices
from chat.forms import StrategyForm
from chat.live import GroupPublisher
from chat.management.pipes import silence_stdout
from chat.models import TOOL_CHOICE_AUTO, AgentRun, Conversation, Strategy
from chat.owner import RunOwner
from chat.recorder import Update
from chat.runs import Listener, create_run
from chat.validation import MessageError, clean_message

RESULT_PREVIEW_CHARS = 600
# Reasoning is printed with this in front of every line, so it is not read as the answer.
THINKING_PREFIX = "  │ "
THINKING_HEADER = "  │ thinking:"
MOVED_NOTE = "  (the text above was the model's thinking, not its answer)"


def _unknown_model(key: str, agent: AgentDefinition | None) -> str:
    models = allowed_models(agent, model_choices()) if agent else model_choices()
    listed = ", ".join(f"{key} ({label})" for key, label in models)
    if agent is not None and key in dict(model_choices()):
        return f"The agent {agent.name!r} does not use the model {key!r}; it uses: {listed}."
    return f"No configured model is called {key!r}; --model takes one of: {listed}."


PAUSED = (
    "Run {run_id} is waiting for a decision on its tool calls: approve or deny them in the "
    "admin (Approvals), or in the browser if conversation {conversation_id} is yours (ask "
    "--user NAME). A running server goes on with the run within AGENT_HEARTBEAT_S of the "
    "decision. This command exits with status 3."
)


class TracePrinter:
    """A run listener that writes each step to a terminal as it happens."""

    def __init__(self, out: TextIO, *, stream_text: bool = True, raw_format: bool = False) -> None:
        self.out = out
        self.stream_text = stream_text
        # A text strategy streams its format (Thought:, Action:...); the answer is printed
        # again on its own at the end.
        self.raw_format = raw_format
        self.closed = False
        self._midline = False
        self._thinking = False  # the last thing printed was reasoning

    def _write(self, text: str) -> None:
        if self.closed:
            return
        try:
            if isinstance(self.out, OutputWrapper):
                self.out.write(text, ending="")  # OutputWrapper would add a newline
            else:
                self.out.write(text)
            self.out.flush()
        except BrokenPipeError:
            # The reader went away (`ask ... | head`): stop printing, let the run finish.
            self.closed = True

    def _line(self, text: str = "") -> None:
        if self._midline:
            self._write("\n")
            self._midline = False
        self._write(text + "\n")

    async def __call__(self, update: Update) -> None:
        """Print what ``update``'s event says; ``TypeError`` for a kind it does not know."""
        match update.event:
            case RunStarted() | ModelTurnStarted():
                pass  # the header line said the model; each turn shows by what it does
            case TextDelta(text=text):
                if self.stream_text:
                    if self._thinking:
                        self._end_thinking()
                    self._write(text)
                    self._midline = not text.endswith("\n")
            case ReasoningDelta() as thought:
                if self.stream_text:
                    self._reasoning(thought)
            case ModelTurnFinished() as turn:
                self._turn_finished(turn)
            case ToolCallStarted() as call:
                args = (
                    call.args
                    if isinstance(call.args, str)
                    else json.dumps(call.args, ensure_ascii=False)
                )
                shown = f"({args})" if args else " (arguments could not be read)"
                self._line(f"→ {call.name or '(no tool named)'}{shown}  [{call.tool_call_id}]")
            case ToolCallFinished() as call:
                result = call.result
                if len(result) > RESULT_PREVIEW_CHARS:
                    result = result[:RESULT_PREVIEW_CHARS] + f"… ({len(call.result):,} chars)"
                if call.is_format_error:  # the call never ran: the model's output did not parse
                    self._line(f"← format error, sent back to the model: {result}")
                else:
                    self._line(f"← {call.name} {call.status} in {call.duration_ms} ms: {result}")
            case ApprovalRequested() as call:
                args = json.dumps(call.args, ensure_ascii=False) if call.args else ""
                self._line(f"⏸ {call.name}({args}) waits for a person's approval  "
                           f"[{call.tool_call_id}]")  # fmt: skip
            case RunPaused():
                conversation_id = update.conversation_id
                self._line(PAUSED.format(run_id=update.run_id, conversation_id=conversation_id))
            case RunFinished() as end:
                self._run_finished(end, update.run, update.run_id)
            case other:
                raise TypeError(f"not a runtime event the trace printer knows: {other!r}")

    def _reasoning(self, thought: ReasoningDelta) -> None:
        """Print streamed reasoning dimmed, each line behind :data:`THINKING_PREFIX`."""
        if thought.moved:
            self._line(MOVED_NOTE)
            self._start_thinking()
        elif not self._thinking:
            self._start_thinking()
        self._write(self._dim(thought.text.replace("\n", "\n" + THINKING_PREFIX)))
        self._midline = True

    def _start_thinking(self) -> None:
        self._line(self._dim(THINKING_HEADER))
        self._write(THINKING_PREFIX)
        self._thinking = True

    def _end_thinking(self) -> None:
        self._thinking = False
        if self._midline:
            self._write("\n")
            self._midline = False

    def _dim(self, text: str) -> str:
        """Return ``text`` in the terminal's faint style when writing to a terminal."""
        isatty = getattr(self.out, "isatty", None)
        return f"\x1b[2m{text}\x1b[0m" if isatty is not None and isatty() else text

    def _turn_finished(self, turn: ModelTurnFinished) -> None:
        if self._thinking:
            self._end_thinking()
        if turn.reasoning and not self.stream_text:
            lines = turn.reasoning.replace("\n", "\n" + THINKING_PREFIX)
            self._line(self._dim(f"{THINKING_HEADER}\n{THINKING_PREFIX}{lines}"))
        if turn.error:
            self._line(f"[model turn {turn.iteration}] error: {turn.error}")
        elif turn.tool_calls or turn.invalid_tool_calls:
            count = len(turn.tool_calls) + len(turn.invalid_tool_calls)
            unusable = len(turn.invalid_tool_calls)
            note = f", {unusable} could not be used" if unusable else ""
            self._line(f"[model turn {turn.iteration}] asked for {count} tool call(s){note}")

    def _run_finished(self, end: RunFinished, run: AgentRun | None, run_id: int) -> None:
        self._line()
        if end.output and (not self.stream_text or self.raw_format):
            self._line(("Answer:\n" if self.stream_text else "") + end.output)
        took = f" in {run.duration_ms} ms" if run and run.duration_ms is not None else ""
        self._line(f"Run {run_id} {end.status}{took}, {end.iterations} model turn(s)")
        if end.error:
            self._line(f"Error: {end.error}")


class Command(BaseCommand):
    help = "Ask the agent a question from the terminal; prints the trace and stores the run."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("question", help="what to ask")
        parser.add_argument(
            "--conversation",
            type=int,
            help="continue conversation ID",
        )
        parser.add_argument("--user", help="owner of a new conversation (a username)")
        parser.add_argument(
            "--no-stream",
            action="store_true",
            help="print the answer at the end",
        )
        parser.add_argument(
            "--strategy",
            choices=Strategy.values,
            help="how the model asks for tools, for a new conversation (default: "
            "AGENT_STRATEGY, tool_calling; a continued conversation keeps its own)",
        )
        parser.add_argument(
            "--agent",
            metavar="NAME",
            help="which agent a new conversation talks to (default: the first of "
            "AGENTS_FILE; see docs/agents.md); a continued conversation keeps its own",
        )
        parser.add_argument(
            "--model",
            metavar="KEY",
            help="which configured model a new conversation uses (default: default, the "
            "one of AGENT_PROVIDER; see docs/models.md); a continued conversation keeps "
            "its own unless that one is no longer configured",
        )
        parser.add_argument(
            "--tool-choice",
            help="native tool calling: auto (default), required, or a tool's name; "
            "applies to the first model turn",
        )
        parser.add_argument(
            "--no-parallel-tool-calls",
            action="store_true",
            help="native tool calling: ask for one tool call per model turn",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            question = clean_message(options["question"], max_chars=settings.CHAT_MAX_MESSAGE_CHARS)
        except MessageError as exc:
            raise CommandError(f"{exc} (limit: CHAT_MAX_MESSAGE_CHARS)") from None
        conversation = self._conversation(options)
        options_shown = ""
        if conversation.uses_native_tool_calls:
            options_shown = f" (tool_choice {conversation.tool_choice}, " + (
                "parallel calls)" if conversation.parallel_tool_calls else "one call per turn)"
            )
        badge = model_badge(model_key=conversation.model_key)
        agent = find_agent(conversation.agent_key)
        agent_label = agent.label if agent else f"{conversation.agent_key} (no longer configured)"
        self.stdout.write(
            f"Model: {badge.label} · strategy {conversation.strategy}{options_shown} · "
            f"agent {agent_label} · conversation {conversation.pk}\n"
        )
        try:
            run = create_run(conversation_id=conversation.pk, content=question)
        except store.RunAlreadyGoing:
            raise CommandError(f"Conversation {conversation.pk} has a run going.") from None
        except store.ConversationGone:
            raise CommandError(
                f"Conversation {conversation.pk} was deleted by its owner: start a new one."
            ) from None
        printer = TracePrinter(
            self.stdout,
            stream_text=not options["no_stream"],
            raw_format=not conversation.uses_native_tool_calls,
        )
        # Browsers watching this conversation through Redis see the run live too.
        publisher = (
            GroupPublisher(get_channel_layer(), conversation.pk) if settings.REDIS_URL else None
        )
        try:
            # Rendered here, in sync code, from the rows create_run loaded.
            started = fragments.run_started(run)
            finished = asyncio.run(self._run(run.pk, started, printer, publisher))
        except KeyboardInterrupt:
            # asyncio.run cancelled the run's task, which stored the run as cancelled.
            raise CommandError(f"Interrupted: run {run.pk} was stored as cancelled.") from None
        if printer.closed:
            silence_stdout()
        if finished.status == RunStatus.WAITING:
            # Not an end: the run goes on in a server once decided (exit status 3).
            raise CommandError(f"Run {finished.pk} is waiting for approval.", returncode=3)
        if finished.status != RunStatus.SUCCEEDED:
            raise CommandError(f"Run {finished.pk} ended as {finished.status}.")

    async def _run(
        self, run_id: int, started: str, printer: TracePrinter, publisher: GroupPublisher | None
    ) -> AgentRun:
        listeners: list[Listener] = [printer]
        if publisher is not None:
            await publisher.publish(started)
            listeners.append(publisher)
        # This process's own run owner (not a server's: it lives for one run), so a Stop from a
        # page reaches it through the layer.
        owner = RunOwner(get_channel_layer(), server=False)
        owner.open()
        try:
            finished = await owner.start(run_id, listeners=listeners)
        finally:
            await owner.close()
        if finished is None:  # stopped (from a page): its end is in the row
            finished = await database_sync_to_async(store.run_get)(run_id=run_id)
        return finished

    def _conversation(self, options: dict[str, Any]) -> Conversation:
        if options["conversation"] is not None:
            conversation = Conversation.objects.filter(pk=options["conversation"]).first()
            if conversation is None:
                raise CommandError(f"No conversation with id {options['conversation']}.")
            if options["tool_choice"] or options["no_parallel_tool_calls"]:
                raise CommandError(
                    f"Conversation {conversation.pk} keeps the options it started with; "
                    "--tool-choice and --no-parallel-tool-calls apply to a new conversation."
                )
            self._keep_or_replace_model(conversation, options["model"])
            agent = find_agent(conversation.agent_key)
            if options["agent"] and (agent is None or options["agent"] != agent.name):
                raise CommandError(
                    f"Conversation {conversation.pk} talks to the agent "
                    f"{conversation.agent_key!r}; every run of a conversation uses one. "
                    "Leave out --agent or start a new conversation."
                )
            asked = options["strategy"]
            if asked and asked != conversation.strategy:
                raise CommandError(
                    f"Conversation {conversation.pk} uses the {conversation.strategy} "
                    f"strategy; every run of a conversation uses one. Leave out --strategy "
                    f"or start a new conversation."
                )
            return conversation
        owner = None
        if options["user"]:
            owner = get_user_model().objects.filter(username=options["user"]).first()
            if owner is None:
                raise CommandError(f"No user named {options['user']!r}.")
        agent = find_agent(options["agent"] or "")
        if agent is None:
            names = ", ".join(name for name, _ in agent_choices())
            raise CommandError(f"No agent is called {options['agent']!r}; --agent takes one "
                               f"of: {names}.")  # fmt: skip
        keys = [key for key, _ in model_choices()]
        default_model, default_strategy = agent_settings(
            agent, model_key=PRIMARY_KEY, strategy=settings.AGENT_STRATEGY, model_keys=keys
        )
        strategy = options["strategy"] or default_strategy
        native_options = options["tool_choice"] or options["no_parallel_tool_calls"]
        if native_options and strategy != Strategy.TOOL_CALLING:
            raise CommandError(
                "--tool-choice and --no-parallel-tool-calls apply to the tool_calling "
                f"strategy only, not {strategy} (text strategies make one call per turn)."
            )
        form = StrategyForm(
            {
                "agent": agent.name,
                "model": options["model"] or default_model,
                "strategy": strategy,
                "tool_choice": options["tool_choice"] or TOOL_CHOICE_AUTO,
                "parallel_tool_calls": not options["no_parallel_tool_calls"],
            },
            tool_names=[tool.name for tool in code_tools_for(agent.name)],
            models=allowed_models(agent, model_choices()),
            agents=agent_choices(),
            strategies=agent.strategies,
        )
        if not form.is_valid():
            if "model" in form.errors:
                raise CommandError(_unknown_model(options["model"], agent))
            if "strategy" in form.errors and agent.strategies:
                raise CommandError(f"The agent {agent.name!r} uses the strategies "
                                   f"{', '.join(agent.strategies)}; not {strategy}.")  # fmt: skip
            errors = " ".join(str(e) for errs in form.errors.values() for e in errs)
            raise CommandError(errors)
        return Conversation.objects.create(owner=owner, **form.cleaned_data)

    def _keep_or_replace_model(self, conversation: Conversation, asked: str | None) -> None:
        """Refuse ``--model`` for a continued conversation, but to replace a model gone.

        Like the page: a conversation keeps its model, unless that one is no longer
        configured; then ``--model`` moves it to a configured one.
        """
        if not asked or asked == conversation.model_key:
            return
        keys = dict(model_choices())
        if conversation.model_key in keys:
            raise CommandError(
                f"Conversation {conversation.pk} uses the model {conversation.model_key!r}; "
                "every run of a conversation uses one. Leave out --model or start a new "
                "conversation."
            )
        agent = find_agent(conversation.agent_key)
        if asked not in dict(allowed_models(agent, model_choices()) if agent else keys):
            raise CommandError(_unknown_model(asked, agent))
        conversation.model_key = asked
        conversation.save(update_fields=["model_key", "updated_at"])
