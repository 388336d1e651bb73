"""The chat app: conversations, runs and steps, the live page and the admin."""

from __future__ import annotations

from django.apps import AppConfig


class ChatConfig(AppConfig):
    """App config for ``chat``."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "chat"
    verbose_name = "Chat and agent runs"

    def ready(self) -> None:
        from django.core import checks

        from chat import signals  # noqa: F401  (connects the receivers)
        from chat.checks import TAG, check_agent_model, check_agents, check_run_workers_layer

        checks.register(check_agent_model, TAG)
        checks.register(check_agents, TAG)
        checks.register(check_run_workers_layer, TAG)
