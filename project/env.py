"""Read settings from environment variables; a bad value raises ImproperlyConfigured."""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation
from typing import TypeVar

from django.core.exceptions import ImproperlyConfigured

from agents.approvals import ToolPolicy

N = TypeVar("N", int, float)

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    """Return the variable ``name`` stripped of surrounding white space, or ``default``."""
    return os.environ.get(name, default).strip()


def env_choice(name: str, default: str, choices: Iterable[str]) -> str:
    """Return ``name`` if it is one of ``choices``, else raise ImproperlyConfigured."""
    value = env_str(name, default)
    allowed = list(choices)
    if value not in allowed:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
    return value


def env_bool(name: str, default: bool) -> bool:
    """Return ``name`` as a boolean (1/true/yes/on or 0/false/no/off, any case)."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, not {raw!r}")


def _env_number(name: str, default: N, cast: type[N], kind: str, minimum: N | None) -> N:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = cast(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be {kind}, not {raw!r}") from None
    if not math.isfinite(value):
        # float() takes "nan" and "inf": a NaN passes every minimum (each comparison is
        # false) and, as a delay, a timer fires at once or never.
        raise ImproperlyConfigured(f"{name} must be a finite number, not {raw!r}")
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, not {value}")
    return value


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    """Return ``name`` as an integer no smaller than ``minimum``."""
    return _env_number(name, default, int, "an integer", minimum)


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    """Return ``name`` as a float no smaller than ``minimum``."""
    return _env_number(name, default, float, "a number", minimum)


def env_list(name: str, default: list[str]) -> list[str]:
    """Return ``name`` split on commas, blanks dropped."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_proxy_ssl_header(name: str) -> tuple[str, str] | None:
    """Return Django's ``SECURE_PROXY_SSL_HEADER`` from a header's name (``X-Forwarded-Proto``).

    ``("HTTP_X_FORWARDED_PROTO", "https")``: a request is secure when the proxy sends that
    header with the value ``https``. Unset or blank: None. Raises ImproperlyConfigured for
    a name that is not letters, digits and hyphens.
    """
    raw = env_str(name)
    if not raw:
        return None
    if not re.fullmatch(r"[A-Za-z0-9]+(-[A-Za-z0-9]+)*", raw):
        raise ImproperlyConfigured(
            f"{name} must be a header name such as X-Forwarded-Proto, not {raw!r}"
        )
    return f"HTTP_{raw.upper().replace('-', '_')}", "https"


def env_tool_policies(name: str) -> dict[str, str]:
    """Return ``name`` (``"tool=ask,other=deny"``) as ``{tool: policy}``.

    Policies are :class:`agents.approvals.ToolPolicy` values (allow, ask, deny); an
    empty or unset variable gives ``{}``. Raises ImproperlyConfigured for an entry
    without ``=``, an empty tool name, an unknown policy or a tool named twice.
    """
    policies: dict[str, str] = {}
    for entry in env_str(name).split(","):
        if not entry.strip():
            continue
        tool, sep, policy = (part.strip() for part in entry.partition("="))
        if not sep or not tool:
            raise ImproperlyConfigured(f"{name}: {entry.strip()!r} is not tool=policy")
        if policy not in set(ToolPolicy):
            allowed = ", ".join(ToolPolicy)
            raise ImproperlyConfigured(
                f"{name}: the policy of {tool!r} must be one of {allowed}, not {policy!r}"
            )
        if tool in policies:
            raise ImproperlyConfigured(f"{name}: {tool!r} is named twice")
        policies[tool] = policy
    return policies


def env_decimal(name: str, default: str) -> Decimal:
    """Return ``name`` as a non-negative :class:`~decimal.Decimal` (money: never float)."""
    raw = env_str(name, default).strip() or default
    try:
        value = Decimal(raw)
    except InvalidOperation:
        raise ImproperlyConfigured(f"{name} must be a number, not {raw!r}") from None
    if not value.is_finite() or value < 0:
        raise ImproperlyConfigured(f"{name} must be a number of at least 0, not {raw!r}")
    return value


_CAPTURE_ON = {"span_only", "span_and_event"}
_CAPTURE_OFF = {"no_content", "event_only"}


def env_content_capture(name: str, default: bool) -> bool:
    """Return ``name`` as "capture GenAI message content on spans".

    Takes what :func:`env_bool` takes and the content capturing modes of
    OpenTelemetry's GenAI instrumentations (``SPAN_ONLY``, ``SPAN_AND_EVENT``: on;
    ``NO_CONTENT``, ``EVENT_ONLY``: off, as we put content on spans only).
    """
    raw = os.environ.get(name, "").strip().lower()
    if raw in _CAPTURE_ON:
        return True
    if raw in _CAPTURE_OFF:
        return False
    return env_bool(name, default)


def env_otel_traces_endpoint() -> bool:
    """Return True when the standard OpenTelemetry environment names an OTLP endpoint
    for traces (``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``)
    and does not switch the SDK off (``OTEL_SDK_DISABLED=true``)."""
    if env_str("OTEL_SDK_DISABLED").lower() == "true":
        return False
    return bool(env_str("OTEL_EXPORTER_OTLP_ENDPOINT")
                or env_str("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))  # fmt: skip


def env_json_strings(name: str) -> list[str]:
    """Return ``name`` read as a JSON array of strings (``'["ACME-[0-9]{6}"]'``); unset or
    blank gives ``[]``. Raises ImproperlyConfigured for text that is not JSON or not an
    array of strings, naming the variable and what is wrong."""
    raw = env_str(name)
    if not raw:
        return []
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ImproperlyConfigured(
            f"{name} must be a JSON array of strings, e.g. '[\"ACME-[0-9]{{6}}\"]': {exc}"
        ) from None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ImproperlyConfigured(f"{name} must be a JSON array of strings, not {raw!r}")
    return value
