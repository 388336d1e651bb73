"""Pick a new chat's settings in the page: they live in a disclosure by the composer."""

from __future__ import annotations

from typing import Any


def open_settings(page: Any) -> None:
    """Open the chat's Settings disclosure (no change if it is open)."""
    if not page.evaluate("document.querySelector('#conversation-settings')?.open"):
        page.click("#conversation-settings > summary")
    page.wait_for_selector("#conversation-settings[open] .settings")


def pick_setting(page: Any, select: str, value: str) -> None:
    """Open Settings and choose ``value`` in the ``select`` (a CSS selector)."""
    open_settings(page)
    page.select_option(select, value)
