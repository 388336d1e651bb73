"""Top-level URLs: the chat app, accounts, the admin and the health check."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from chat.health import healthz

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("chat.urls")),
]
