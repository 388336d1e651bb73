"""One redaction policy for every way a trace leaves the app (docs/redaction.md).

``TRACE_REDACT`` names the built-in detectors (:data:`chat.traces.detectors.BUILT_IN`,
all by default, ``none`` for none) and ``TRACE_REDACT_PATTERNS`` the operator's own
regexes; :func:`active` returns the :class:`Redactor` they make, compiled once. Every
export (CSV, JSONL, OTLP files, live telemetry) passes each text value that leaves
through it; the stored rows keep the truth, and staff with ``chat.view_unredacted_trace``
see it in the admin (:mod:`chat.traces.viewing`). No Django import at module level:
``project/settings.py`` calls :func:`redactor_from` to refuse a bad policy at start-up.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

import regex
from django.core.exceptions import ImproperlyConfigured

from chat.traces import detectors
from chat.traces.detectors import BUILT_IN, CUSTOM, mark

NONE = "none"
# The shortest text a built-in detector can match ("a@b.cd"): shorter text is let through.
SHORTEST_MATCH = 6
# Texts up to this long are remembered with their redaction (a run's question and answer
# repeat on each of its CSV rows); at most CACHE_ENTRIES of them, then the memo starts over.
CACHE_CHARS = 4096
CACHE_ENTRIES = 512
# How long one operator pattern may search one value: a pattern that backtracks
# catastrophically would otherwise hold the GIL, and every thread with it, for hours.
PATTERN_TIMEOUT_S = 0.1
PATTERN_TIMED_OUT = (
    "TRACE_REDACT_PATTERNS: pattern %r took longer than %.2f s on a value of %d characters; "
    "the value is redacted whole (this is logged once per pattern)"
)
# A mark already put by a detector: operator patterns run on the text between marks only.
MARKED = re.compile(r"(\[REDACTED:[a-z_]+\])")
# A key redacted to one already in the object gets " (2)", " (3)"... so no value is lost.
DUPLICATE_KEY = "{} ({})"
# re's flags and the regex package's: re.ASCII is 256, regex.ASCII 128.
RE_FLAGS = (
    (re.IGNORECASE, regex.IGNORECASE), (re.MULTILINE, regex.MULTILINE),
    (re.DOTALL, regex.DOTALL), (re.VERBOSE, regex.VERBOSE), (re.ASCII, regex.ASCII),
)  # fmt: skip

log = logging.getLogger(__name__)
# The patterns that have timed out in this process: each is logged the first time only.
_timed_out: set[str] = set()


class Redactor:
    """Replace what the policy names in text leaving the app; the rows keep the truth.

    ``Redactor()`` redacts nothing. ``detectors`` are names of
    :data:`chat.traces.detectors.BUILT_IN`; ``patterns`` operator regexes compiled with the
    ``regex`` package (for its time-out; a compiled ``re`` pattern is compiled again with
    it), whose matches become ``[REDACTED:custom]``. Built-ins run first, each behind a
    cheap test (docs/redaction.md, "Cost"); the operator's patterns never touch a mark,
    and a value one of them cannot search within :data:`PATTERN_TIMEOUT_S` becomes
    ``[REDACTED:custom]`` whole.
    """

    def __init__(
        self,
        detectors: Iterable[str] = (),
        patterns: Sequence[regex.Pattern[str] | re.Pattern[str]] = (),
    ) -> None:
        names = frozenset(detectors)
        unknown = names - set(BUILT_IN)
        if unknown:
            raise ValueError(f"unknown detectors: {', '.join(sorted(unknown))}")
        self.detectors = tuple(name for name in BUILT_IN if name in names)
        self.patterns = tuple(_with_time_out(pattern) for pattern in patterns)
        self._email = "email" in names
        self._api_key = "api_key" in names
        self._bearer = "bearer" in names
        self._secret = "secret" in names
        self._credentials = self._api_key or self._bearer or self._secret
        self._numbers = names & {"phone", "card"}
        self._custom = mark(CUSTOM)
        self._memo: dict[str, str] = {}

    @property
    def enabled(self) -> bool:
        """Return True when the policy can change some text."""
        return bool(self.detectors or self.patterns)

    def text(self, value: str) -> str:
        """Return ``value`` with every match of the policy replaced by its mark.

        Anything but a string (None, a number) is returned as it is: callers pass
        nullable columns straight through.
        """
        if not isinstance(value, str):
            return value
        if len(value) < SHORTEST_MATCH and not self.patterns:
            return value
        short = len(value) <= CACHE_CHARS
        if short and (known := self._memo.get(value)) is not None:
            return known
        redacted = self._redact(value)
        if short:
            if len(self._memo) >= CACHE_ENTRIES:
                self._memo.clear()
            self._memo[value] = redacted
        return redacted

    def _redact(self, text: str) -> str:
        if self._secret:  # before e-mail, which would take "password@host" for an address
            text = detectors.redact_userinfo(text)
        if self._email:
            text = detectors.redact_email(text)
        if self._credentials and detectors.may_hold_credentials(text):
            if self._api_key:
                text = detectors.redact_api_keys(text)
            if (self._bearer or self._secret) and detectors.names_a_credential(text):
                if self._bearer:
                    text = detectors.redact_cookies(detectors.redact_bearer(text))
                if self._secret:
                    text = detectors.redact_secrets(text)
        if self._numbers:
            text = detectors.redact_numbers(text, self._numbers)
        for pattern in self.patterns:
            text = self._custom_sub(pattern, text)
            if text == self._custom:
                break
        return text

    def _custom_sub(self, pattern: regex.Pattern[str], text: str) -> str:
        """Mark ``pattern``'s matches between the marks already in ``text``; the whole
        text when the search outlasts :data:`PATTERN_TIMEOUT_S`."""
        parts = MARKED.split(text) if "[REDACTED:" in text else [text]
        deadline = time.monotonic() + PATTERN_TIMEOUT_S  # for the value, not each part
        try:
            for index in range(0, len(parts), 2):  # odd indexes are the marks
                if parts[index]:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise TimeoutError
                    parts[index] = pattern.sub(self._custom, parts[index], timeout=left)
        except TimeoutError:
            if pattern.pattern not in _timed_out:
                _timed_out.add(pattern.pattern)
                log.warning(PATTERN_TIMED_OUT, pattern.pattern, PATTERN_TIMEOUT_S, len(text))
            return self._custom
        return "".join(parts)

    def value(self, value: Any) -> Any:
        """Return a JSON value with every string in it, keys included, passed through
        :meth:`text`.

        Two keys of one object that redact to the same text are both kept, the later ones
        as ``"<key> (2)"``, ``"<key> (3)"``... in their order. Dicts, lists and tuples are
        rebuilt (a tuple as a list, as JSON has it); numbers, booleans and None are kept,
        except an integer the policy would catch written as text (a card number, a phone
        number), which becomes its mark, a string. With the
        ``secret`` detector, a value whose key names a credential (``password``,
        ``api_key``, ``token``...) becomes ``[REDACTED:secret]`` whatever it holds, when
        it is a string or a number; a nested object under such a key is walked.
        """
        if not self.enabled:
            return value
        return self._value(value)

    def _value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return self._object(value)
        if isinstance(value, list | tuple):
            return [self._value(item) for item in value]
        if isinstance(value, int) and not isinstance(value, bool):
            shown = str(value)
            redacted = self.text(shown)
            return value if redacted == shown else redacted
        return value

    def _object(self, value: dict[Any, Any]) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        for key, item in value.items():
            shown = self.text(key) if isinstance(key, str) else key
            if shown in out:
                count = 2
                while DUPLICATE_KEY.format(shown, count) in out:
                    count += 1
                shown = DUPLICATE_KEY.format(shown, count)
            out[shown] = self._item(key, item)
        return out

    def _item(self, key: Any, item: Any) -> Any:
        if (
            self._secret
            and isinstance(key, str)
            and isinstance(item, str | int | float)
            and not isinstance(item, bool)
            and item != ""
            and detectors.is_secret_key(key)
        ):
            return mark("secret")
        return self._value(item)


def _with_time_out(pattern: regex.Pattern[str] | re.Pattern[str]) -> regex.Pattern[str]:
    if not isinstance(pattern, re.Pattern):
        return pattern
    flags = 0
    for re_flag, regex_flag in RE_FLAGS:
        if pattern.flags & re_flag:
            flags |= regex_flag
    return regex.compile(pattern.pattern, flags | regex.VERSION0)


def _detector_names(setting: str, names: Sequence[str]) -> list[str]:
    words = [name.strip().lower() for name in names if name.strip()]
    if words == [NONE]:
        return []
    unknown = [word for word in words if word not in BUILT_IN]
    if unknown:
        raise ImproperlyConfigured(
            f"{setting} names {', '.join(repr(w) for w in unknown)}: a detector is one of "
            f"{', '.join(BUILT_IN)}, or {NONE!r} alone for none (docs/redaction.md)"
        )
    return words


def _compiled(setting: str, patterns: Sequence[str]) -> list[regex.Pattern[str]]:
    compiled = []
    for number, pattern in enumerate(patterns, start=1):
        if not isinstance(pattern, str) or not pattern:
            raise ImproperlyConfigured(
                f"{setting}: pattern {number} must be a non-empty string, not {pattern!r}"
            )
        try:
            # V0: the syntax and behaviour of Python's re.
            compiled_pattern = regex.compile(pattern, regex.VERSION0)
        except regex.error as exc:
            raise ImproperlyConfigured(
                f"{setting}: pattern {number} ({pattern!r}) does not compile: {exc}"
            ) from None
        if compiled_pattern.search("") is not None:
            raise ImproperlyConfigured(
                f"{setting}: pattern {number} ({pattern!r}) matches the empty string, so "
                "it would mark every gap between two characters"
            )
        compiled.append(compiled_pattern)
    return compiled


def redactor_from(
    names: Sequence[str],
    patterns: Sequence[str],
    *,
    names_setting: str = "TRACE_REDACT",
    patterns_setting: str = "TRACE_REDACT_PATTERNS",
) -> Redactor:
    """Return the redactor of detector ``names`` (``["none"]``: no built-in) and operator
    regexes ``patterns``.

    Raises ImproperlyConfigured naming the setting and the culprit for an unknown
    detector, a pattern that is not a non-empty string, does not compile, or matches
    the empty string.
    """
    return Redactor(_detector_names(names_setting, names), _compiled(patterns_setting, patterns))


@lru_cache(maxsize=8)
def _cached(names: tuple[str, ...], patterns: tuple[str, ...]) -> Redactor:
    return redactor_from(names, patterns)


def active() -> Redactor:
    """Return the redactor the settings configure (``TRACE_REDACT``,
    ``TRACE_REDACT_PATTERNS``), compiled once per distinct setting.

    Call it once per export: each call's redactor keeps a memo of the texts it has seen.
    """
    from django.conf import settings

    names = tuple(getattr(settings, "TRACE_REDACT", BUILT_IN))
    patterns = tuple(getattr(settings, "TRACE_REDACT_PATTERNS", ()))
    shared = _cached(names, patterns)
    return Redactor(shared.detectors, shared.patterns)
