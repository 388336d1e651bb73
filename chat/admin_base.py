"""What the admin modules share: read-only admins and inlines, and how times read.

Runs, their steps and the decisions on held calls are evidence: their admins show rows
and allow no change (:class:`ReadOnlyAdmin`, :class:`ReadOnlyInline`).
"""

from __future__ import annotations

from datetime import datetime

from django.contrib import admin
from django.contrib.auth import get_permission_codename
from django.http import HttpRequest
from django.utils import timezone
from django.utils.formats import date_format

PRE = '<pre class="trace-pre">{}</pre>'


def when(value: datetime | None, pattern: str = "Y-m-d H:i:s T") -> str:
    """Return a time in the site's zone, by default to the second and named."""
    return "–" if value is None else date_format(timezone.localtime(value), pattern)


class ReadOnlyInline(admin.TabularInline):
    """An inline that shows rows and allows no change.

    Its rows are part of the parent (a run's steps, a conversation's messages): whoever may
    view the parent sees them, with no permission of their own needed.
    """

    extra = 0
    can_delete = False

    def has_view_permission(self, request: HttpRequest, obj: object = None) -> bool:
        opts = self.parent_model._meta
        return request.user.has_perm(f"{opts.app_label}.{get_permission_codename('view', opts)}")

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class ReadOnlyAdmin(admin.ModelAdmin):
    """No adding or editing; deleting is for superusers only."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return request.user.is_active and request.user.is_superuser
