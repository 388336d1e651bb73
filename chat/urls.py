"""URLs of the chat pages."""

from __future__ import annotations

from django.urls import path

from chat import branch_views, compare_views, downloads, views

app_name = "chat"
urlpatterns = [
    path("", views.home, name="home"),
    path("c/new/", views.new_conversation, name="new"),
    path("c/list/", views.conversation_list, name="list"),
    path("c/<int:conversation_id>/", views.conversation_page, name="conversation"),
    path("c/<int:conversation_id>/earlier/", views.conversation_earlier, name="earlier"),
    path("c/<int:conversation_id>/runs/<int:run_id>/steps/", views.run_steps, name="run_steps"),
    path(
        "c/<int:conversation_id>/runs/<int:run_id>/timeline/",
        views.run_timeline,
        name="run_timeline",
    ),
    path(
        "c/<int:conversation_id>/runs/<int:run_id>/compare/",
        compare_views.run_compare_menu,
        name="compare_menu",
    ),
    path(
        "c/<int:conversation_id>/compare/<int:left_id>/<int:right_id>/",
        compare_views.run_compare,
        name="compare",
    ),
    path("c/<int:conversation_id>/branch/", branch_views.branch_switch, name="branch"),
    path("c/<int:conversation_id>/fork/", branch_views.conversation_fork, name="fork"),
    path("c/<int:conversation_id>/strategy/", views.conversation_strategy, name="strategy"),
    path("c/<int:conversation_id>/menu/", views.conversation_menu, name="menu"),
    path("c/<int:conversation_id>/rename/", views.conversation_rename, name="rename"),
    path("c/<int:conversation_id>/delete/", views.conversation_delete, name="delete"),
    path(
        "c/<int:conversation_id>/download/<slug:format_name>/",
        downloads.conversation_download,
        name="download",
    ),
]
