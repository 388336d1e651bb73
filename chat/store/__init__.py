"""The ORM boundary: every database read and write the async code needs.

Plain sync functions with keyword-only arguments and ``<noun>_<verb>`` names; async
callers use them only through ``channels.db.database_sync_to_async``. One module per
concern, all of it importable from here:

- :mod:`chat.store.conversations`: who owns a chat, its settings and its history;
- :mod:`chat.store.branches` (and :mod:`chat.store.tree`): the question tree, the
  branch a page shows, retry / regenerate / edit, forks and switching branch;
- :mod:`chat.store.listing`: the conversation list (one query), searched, by date;
- :mod:`chat.store.runs`: a run's lifecycle, from the user's message to its end, and
  its steps;
- :mod:`chat.store.limits`: the per-owner run limit and the sweeps (runs of a dead
  process, retention);
- :mod:`chat.store.pages`: the conversation page's window of runs (the newest, or those
  before a run) and the earlier steps of a long run;
- :mod:`chat.store.approvals`: tool calls held for a person, their decisions, and the
  paused runs they resume;
- :mod:`chat.store.usage`: a run's token counts and cost when it ends, and its
  conversation's sums;
- :mod:`chat.store.feedback`: the owner's thumbs up or down and comment on an answer;
- :mod:`chat.store.queue`: messages sent while a run goes, waiting for its end;
- :mod:`chat.store.rows`: what the others share: loading runs for rendering and, a chunk
  at a time, for exports; counting a run's tool calls; values every database can store.
"""

from __future__ import annotations

from chat.store.approvals import (
    ApprovalRefused,
    Decided,
    ResumeState,
    approval_decide,
    approval_request,
    approvals_expire,
    conversation_grants,
    run_claim_resume,
    run_pause,
    run_resume_state,
    run_steps_for_resume,
    run_stop_waiting,
    runs_ready,
    step_for_card,
    step_of_conversation,
    tool_policies,
)
from chat.store.branches import (
    BranchChoice,
    BranchRefused,
    ConversationPath,
    branch_switch,
    conversation_fork,
    conversation_path,
    run_branch,
)
from chat.store.conversations import (
    GUEST_KEY,
    ConversationStarted,
    Owner,
    conversation_configure,
    conversation_delete,
    conversation_exchanges,
    conversation_get,
    conversation_get_or_create_empty,
    conversation_rename,
    conversation_replace_model,
    conversation_started,
    conversations_adopt,
    conversations_for_owner,
)
from chat.store.feedback import (
    FeedbackRefused,
    feedback_get,
    feedback_give,
    feedback_of,
    feedback_offered,
    feedback_remove,
)
from chat.store.limits import RateLimited, runs_delete, runs_interrupt_stale
from chat.store.listing import LIST_LENGTH, clean_query, conversations_listed, grouped_by_date
from chat.store.pages import (
    RunNotInConversation,
    RunWindow,
    Takes,
    run_steps_before,
    run_with_steps_of,
    runs_window,
)
from chat.store.queue import (
    NotQueued,
    QueueFull,
    Sent,
    message_send,
    queue_list,
    queue_remove,
    queue_steer,
    queue_take,
    queues_ready,
    run_conversation_id,
)
from chat.store.rows import database_answers, runs_in_chunks, runs_with_ids
from chat.store.runs import (
    ConversationGone,
    ModelProvenance,
    RunAlreadyGoing,
    RunWaiting,
    conversation_runs,
    latest_run_shown,
    run_beat,
    run_cancel_requested,
    run_claim_start,
    run_finish,
    run_get,
    run_heartbeat,
    run_release_claim,
    run_request_cancel,
    run_set_owner,
    run_snapshot_record,
    run_start,
    run_stop_unclaimed,
    run_take_owner,
    run_unclaimed,
    run_with_steps,
    runs_to_catch_up,
    runs_unclaimed,
    snapshot_mcp_tool_names,
    step_finish,
    step_resume,
    step_save_text,
    step_start,
)
from chat.store.usage import run_price

__all__ = [
    "GUEST_KEY",
    "LIST_LENGTH",
    "ApprovalRefused",
    "BranchChoice",
    "BranchRefused",
    "ConversationGone",
    "ConversationPath",
    "ConversationStarted",
    "Decided",
    "FeedbackRefused",
    "ModelProvenance",
    "NotQueued",
    "Owner",
    "QueueFull",
    "RateLimited",
    "ResumeState",
    "RunAlreadyGoing",
    "RunNotInConversation",
    "RunWaiting",
    "RunWindow",
    "Sent",
    "Takes",
    "approval_decide",
    "approval_request",
    "approvals_expire",
    "branch_switch",
    "clean_query",
    "conversation_configure",
    "conversation_delete",
    "conversation_exchanges",
    "conversation_fork",
    "conversation_get",
    "conversation_get_or_create_empty",
    "conversation_grants",
    "conversation_path",
    "conversation_rename",
    "conversation_replace_model",
    "conversation_runs",
    "conversation_started",
    "conversations_adopt",
    "conversations_for_owner",
    "conversations_listed",
    "database_answers",
    "feedback_get",
    "feedback_give",
    "feedback_of",
    "feedback_offered",
    "feedback_remove",
    "grouped_by_date",
    "latest_run_shown",
    "message_send",
    "queue_list",
    "queue_remove",
    "queue_steer",
    "queue_take",
    "queues_ready",
    "run_beat",
    "run_branch",
    "run_cancel_requested",
    "run_claim_resume",
    "run_claim_start",
    "run_conversation_id",
    "run_finish",
    "run_get",
    "run_heartbeat",
    "run_pause",
    "run_price",
    "run_release_claim",
    "run_request_cancel",
    "run_resume_state",
    "run_set_owner",
    "run_snapshot_record",
    "run_start",
    "run_steps_before",
    "run_steps_for_resume",
    "run_stop_unclaimed",
    "run_stop_waiting",
    "run_take_owner",
    "run_unclaimed",
    "run_with_steps",
    "run_with_steps_of",
    "runs_delete",
    "runs_in_chunks",
    "runs_interrupt_stale",
    "runs_ready",
    "runs_to_catch_up",
    "runs_unclaimed",
    "runs_window",
    "runs_with_ids",
    "snapshot_mcp_tool_names",
    "step_finish",
    "step_for_card",
    "step_of_conversation",
    "step_resume",
    "step_save_text",
    "step_start",
    "tool_policies",
]
