"""Filters for the decisions on held tool calls, as the admin shows them."""

from __future__ import annotations

import json
from typing import Any

from django import template

register = template.Library()


@register.filter
def arguments_json(arguments: Any, indent: int | None = 2) -> str:
    """Return stored arguments as JSON (Chinese kept readable; one line, keys sorted,
    with ``indent`` None), as stored when the model sent text that is not JSON, and
    ``""`` for none."""
    if arguments is None:
        return ""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False, sort_keys=indent is None, indent=indent)
