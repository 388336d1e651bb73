"""An exchange's branch controls in templates: ``run|branch_options`` and
``run|retryable`` (docs/branches.md)."""

from __future__ import annotations

from django import template

from chat.branches import BranchOptions, branch_options
from chat.models import AgentRun
from chat.store.branches import RETRYABLE

register = template.Library()


@register.filter(name="branch_options")
def run_branch_options(run: AgentRun) -> BranchOptions:
    """Return the models and strategies a regenerate of ``run`` may pick (settings only:
    no query, the run's conversation is loaded with it)."""
    return branch_options(run.conversation)


@register.filter
def retryable(run: AgentRun) -> bool:
    """Return True for a run that ended without succeeding: it offers Retry."""
    return run.status in RETRYABLE
