"""A short title made by the model after a conversation's first run, in the background.

With a real model (a provider entry that is not ``scripted``), the run owner asks the
conversation's model for a title of a few words once its first run has ended
(:meth:`chat.owner.RunOwner.start`). The run is over by then, so this never slows nor
fails it; the call has ``TITLE_TIMEOUT_S`` seconds, any error is logged and the offline
title (:func:`chat.store.titles.title_from`) stays. The new title is stored only if the
conversation still has its offline one (one conditional UPDATE: a rename by its owner
wins) and then sent to its open pages, the header and the sidebar, as a rename is.
ChatGPT and Open WebUI name chats the same way: a second, small request after the first
answer.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from typing import Any

from channels.db import database_sync_to_async
from langchain_core.messages import HumanMessage

from agents.reasoning import split_think
from chat import catalog, fragments
from chat.live import GroupPublisher
from chat.models import AgentRun, Conversation, RunStatus, TitleSource
from chat.store.titles import (
    TITLE_LENGTH,
    conversation_title_from_model,
    first_question,
    title_from,
)

logger = logging.getLogger(__name__)

TITLE_TIMEOUT_S = 30.0
"""Seconds the model has to answer with a title; then the offline one stays."""

TITLE_PROMPT = (
    "Write a title of at most six words for a chat that starts with the question below. "
    "Keep the names, places and dates that tell it apart from similar chats. Answer with "
    "the title alone, in the question's language: no quotes, no full stop.\n\n"
    "Question: {question}"
)
# A run still going has not ended; one that failed or was interrupted most likely could
# not reach its model either, which a title request would only log again.
NOT_AFTER = (RunStatus.RUNNING, RunStatus.WAITING, RunStatus.FAILED, RunStatus.INTERRUPTED)
QUESTION_CHARS = 2_000  # of the question sent with the request: a title needs no more

_QUOTES = "\"'“”‘’「」『』*#`"
# A "Title:" label, with the Markdown a model may wrap it in ("**Title:**", "## Title:").
_LABEL = re.compile(r"^[\s*_#>`]*(?:title|标题)[\s*_`]*[:：][\s*_`]*", re.IGNORECASE)
# A line that only introduces the next ("Sure! Here is a title:", or a label alone).
_INTRO = re.compile(r"[:：][\s*_`]*$")


@dataclass(frozen=True)
class TitleJob:
    """What a model-made title needs: the run whose model makes it, and the title it may
    replace."""

    run: AgentRun
    conversation_id: int
    offline: str
    question: str


def title_job(*, run_id: int) -> TitleJob | None:
    """Return the title job for a run that just ended, or None when none is due (sync).

    Due when the run is its conversation's first and has ended (not failed nor
    interrupted: its model was reachable), its model is a real one
    (a registered provider entry, not ``scripted``), and the conversation's title is
    still the one made offline from its first question (its owner never renamed it).
    """
    run = AgentRun.objects.select_related("conversation", "user_message").filter(pk=run_id).first()
    if run is None or run.status in NOT_AFTER:
        return None
    entry = run.provider_entry
    if entry is None or entry.scripted:
        return None
    conversation = run.conversation
    if AgentRun.objects.filter(conversation_id=conversation.pk, pk__lt=run.pk).exists():
        return None
    if conversation.title_source != TitleSource.QUESTION:
        return None
    question = first_question(conversation_id=conversation.pk)
    if question is None or conversation.title != title_from(question.content):
        return None
    return TitleJob(run, conversation.pk, conversation.title, question.content)


def clean_model_title(text: str) -> str:
    """Return a model's reply as a title: its first line (past lines that only introduce
    the next, "Here is a title:"), without thinking markup, a "Title:" label (in Markdown
    too: "**Title:**"), quotes or a full stop, at most TITLE_LENGTH ("" if nothing is
    left)."""
    _, text = split_think(text)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    # A line that introduces the next is not the title, unless nothing follows it.
    while len(lines) > 1 and _INTRO.search(lines[0]):
        lines.pop(0)
    line = lines[0] if lines else ""
    line = _LABEL.sub("", line).strip(_QUOTES + " ").rstrip(".。").strip(_QUOTES + " ")
    line = " ".join(line.split())
    return title_from(line) if len(line) > TITLE_LENGTH else line


def _store(job: TitleJob, title: str) -> str | None:
    """Store the title if the offline one is still there; return the fragment for the
    conversation's open pages, or None (sync)."""
    if title == job.offline:
        return None
    if not conversation_title_from_model(
        conversation_id=job.conversation_id, offline=job.offline, title=title
    ):
        return None
    return fragments.conversation_renamed(Conversation.objects.get(pk=job.conversation_id))


async def title_after_run(run_id: int, layer: Any, *, timeout_s: float | None = None) -> str:
    """Ask the run's model for its conversation's title if one is due; return the title
    stored ("" when none was due, the model failed or timed out, or the owner renamed
    the conversation meanwhile). Errors are logged, never raised (a cancel is)."""
    job = await database_sync_to_async(title_job)(run_id=run_id)
    if job is None:
        return ""
    prompt = TITLE_PROMPT.format(question=job.question[:QUESTION_CHARS])
    try:
        model = catalog.chat_model_for(job.run)
        async with asyncio.timeout(TITLE_TIMEOUT_S if timeout_s is None else timeout_s):
            reply = await model.ainvoke([HumanMessage(prompt)])
    except TimeoutError:
        logger.warning("run %s: no title from the model in time; the offline one stays", run_id)
        return ""
    except Exception:
        logger.exception("run %s: the model's title failed; the offline one stays", run_id)
        return ""
    title = clean_model_title(str(reply.text))
    if not title:
        logger.warning("run %s: the model's title was empty; the offline one stays", run_id)
        return ""
    html = await database_sync_to_async(_store)(job, title)
    if html is None:
        return ""
    await GroupPublisher(layer, job.conversation_id).publish(html)
    return title
