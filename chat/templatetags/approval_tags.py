"""Filters for the decisions on held tool calls, as the admin shows them."""

from __future__ import annotations

from django import template

from chat.display import arguments_json

register = template.Library()
register.filter("arguments_json", arguments_json)
