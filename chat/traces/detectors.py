"""The built-in detectors of what a trace must not carry out of the app (docs/redaction.md).

Each ``redact_*`` function returns its text with every match replaced by
``[REDACTED:<detector>]``; :class:`chat.traces.redaction.Redactor` runs those the policy
names, each behind a cheap necessary condition (a substring test, or a scan whose first
character is a class, which the regex engine skips through at C speed). Pure Python with
no Django import: ``project/settings.py`` imports it to refuse a bad ``TRACE_REDACT``.

Phone and card numbers share one scan for runs of digits and separators
(:data:`NUMBER_RUN`); which of them a run holds is decided in Python
(:func:`number_spans`), where dates, times, prices and ids can be told apart by their
digit groups, and cards by the Luhn check (ISO/IEC 7812-1).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache

MARK = "[REDACTED:{}]"
CUSTOM = "custom"


def mark(name: str) -> str:
    """Return the text that replaces a match of detector ``name``: ``[REDACTED:name]``."""
    return MARK.format(name)


# E-mail addresses: an ASCII local part (RFC 5322's dot-atom characters that occur in
# practice) and a domain with a letters-only top level. The look-behind starts a match
# only at the start of a local part, so a long run without "@" is scanned once.
EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+'-])[A-Za-z0-9._%+'-]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?)*\.[A-Za-z]{2,24}(?![A-Za-z0-9-])"
)

# Keys with a prefix their issuer documents. The run must hold a digit (checked in
# _api_key) so "sk-learn-something-long" in prose stays.
API_KEY = re.compile(
    r"(?<![A-Za-z0-9_-])(?:"
    r"sk-(?:ant-|proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"  # OpenAI, Anthropic
    r"|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,}"  # GitHub
    r"|(?:AKIA|ASIA)[A-Z0-9]{16}"  # AWS access key ids
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"  # Slack
    r"|AIza[A-Za-z0-9_-]{30,}"  # Google
    r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"  # JWT (RFC 7519)
    r")(?![A-Za-z0-9_-])"
)
API_KEY_TRIGGER = re.compile(r"sk-|sk_|rk_|gh[pousr]_|github_pat_|AKIA|ASIA|xox|AIza|hf_|eyJ")

# Credentials in an HTTP header, after any scheme (RFC 9110 section 11: a token68 or a
# comma-separated list of auth-params, as Digest and AWS Signature Version 4 write them),
# or after the word Bearer. Each part is delimited by a character the one before cannot
# hold, so a scan costs linear time.
AUTH_PARAM = r'[A-Za-z0-9_-]+[ \t]*=[ \t]*(?:\\?"[^"\r\n]{0,4096}"|[A-Za-z0-9._~+/=:;-]+)'
BEARER = re.compile(
    r"(?i)(?P<head>(?:proxy-)?authorization[\"']?[ \t]*[:=][ \t]*[\"']?"
    r"(?:[A-Za-z][A-Za-z0-9_-]*[ \t]+)?"
    r"|(?<![A-Za-z0-9])bearer(?:[\"']?[ \t]*[:=][ \t]*[\"']?|[ \t]+))"
    rf"(?P<value>{AUTH_PARAM}(?:[ \t]*,[ \t]*{AUTH_PARAM})*|[A-Za-z0-9._~+/=-]{{8,}})"
)
# A Cookie or Set-Cookie header's value (it holds a name=value pair: "cookie: chocolate"
# is prose), to the end of its line or quoted string.
COOKIE = re.compile(
    r"(?i)(?P<head>(?<![A-Za-z0-9-])(?:set-)?cookie[ \t]*:[ \t]*)"
    r"(?P<value>[^\r\n\"'=]{0,256}=[^\r\n\"']*)"
)
# The password of a URL's userinfo (RFC 3986 section 3.2.1): scheme://user:password@host.
USERINFO = re.compile(r"(?P<head>://[^/\s:@]{1,256}:)(?P<value>[^/\s@]{1,256})(?=@)")

# `name = value`, `name: value`, `"name": "value"` for names that hold a credential.
SECRET_NAMES = (
    r"(?:x-)?api[_-]?key|access[_-]?token|refresh[_-]?token|auth[_-]?token|id[_-]?token"
    r"|client[_-]?secret|(?:secret[_-]?)?access[_-]?key|secret[_-]?key|private[_-]?key|secret"
    r"|token|password|passwd|pwd"
)
# A name starts a word, or a camelCase part after a prefix (dbPassword, openaiApiKey).
SECRET = re.compile(
    r"(?i)(?:(?<![A-Za-z0-9])|(?-i:(?<=[a-z0-9])(?=[A-Z])))"
    rf"(?P<head>(?:{SECRET_NAMES})[\"']?[ \t]*[:=][ \t]*[\"']?)"
    r"(?P<value>[^\s\"'<>\[\],;&]{8,})"
)
# A JSON object's key that names a credential, after any prefix (OPENAI_API_KEY,
# db_password, dbPassword once CAMEL_BOUNDARY parts it; not token_count): its value goes
# whatever it looks like.
SECRET_KEY = re.compile(
    rf"(?i)(?:[A-Za-z0-9]+[_-])*(?:{SECRET_NAMES}|authorization|proxy-authorization|cookie)"
)
CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
WORDS_TRIGGER = re.compile(r"key|token|secret|passw|pwd|bearer|authoriz|cookie")
# One scan for what the api_key, bearer and secret detectors start from: a key's prefix or
# one of their words in any case. It starts with a class of characters these hold (the
# engine skips the others at C speed), the rest is checked around it; most text has none.
CREDENTIAL_TRIGGER = re.compile(
    r"[-_AJyYkKcCwWbBzZ](?:"
    r"(?<=sk-)|(?<=sk_)|(?<=rk_)|(?<=gh[pousr]_)|(?<=github_pat_)|(?<=hf_)|(?<=xox[abposr]-)"
    r"|(?<=eyJ)|(?<=A)(?:KIA|SIA|Iza)"
    r"|(?<=[kK][eE][yY])|(?<=[tT][oO][kK])(?=[eE][nN])|(?<=[sS][eE][cC])(?=[rR][eE][tT])"
    r"|(?<=[pP][aA][sS][sS][wW])|(?<=[pP][wW])(?=[dD])|(?<=[bB])(?=[eE][aA][rR][eE][rR])"
    r"|(?<=[aA][uU][tT][hH][oO][rR][iI][zZ])|(?<=[cC][oO][oO][kK])(?=[iI][eE]))"
)
SYMBOL_OR_DIGIT = re.compile(r"[0-9_\-./+=~!@#$%^&*]")

# A run of digits and separators, for the phone and card checks. The first character is
# a class, so the scan skips text without digits at C speed; bounded, so a long run of
# digits costs linear time.
NUMBER_RUN = re.compile(r"[+(0-9][0-9 ().-]{6,60}[0-9](?![A-Za-z0-9_:/]|[.,-][0-9])")
GROUP = re.compile(r"\+?\(?[0-9]+\)?")
# A run that follows one of these belongs to a word, a decimal, a path or an id.
NOT_BEFORE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./#-")
CARD_FIRST = "23456"  # ISO/IEC 7812 major industry identifiers of payment cards
MIN_NUMBER_DIGITS = 8  # the shortest number caught: "+" and 8 digits
MIN_NATIONAL_DIGITS = 10  # without "+": a national phone number (a card has 13)
MAX_NUMBER_DIGITS = 19
CHINESE_MOBILE = re.compile(r"1[3-9][0-9]{9}")


def _digits(text: str) -> str:
    return "".join(ch for ch in text if ch.isdigit())


def luhn_ok(digits: str) -> bool:
    """Return True when ``digits`` pass the Luhn check (ISO/IEC 7812-1, annex B)."""
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if index % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def _is_card(text: str, digits: str) -> bool:
    """13-19 digits, spaces or dashes between, a card's first digit, Luhn."""
    if not 13 <= len(digits) <= 19 or digits[0] not in CARD_FIRST:
        return False
    if any(ch in "+()." for ch in text):
        return False
    return luhn_ok(digits)


def _is_phone(groups: list[str], sizes: list[int], digits: str) -> bool:
    """Return True when digit groups (as written, ``+`` and parentheses kept; ``sizes``
    their digit counts) read as a phone number; docs/redaction.md lists the shapes."""
    first = groups[0]
    if first.startswith("+"):
        return 8 <= len(digits) <= 15  # E.164's longest is 15
    if digits.startswith("00") and digits[2:3] not in ("", "0"):
        return 10 <= len(digits) <= 17  # "00" then a country code, as "+"
    if len(groups) == 1:
        # Bare: a Chinese mobile number, or a national number with its trunk 0.
        return (len(digits) == 11 and CHINESE_MOBILE.fullmatch(digits) is not None) or (
            len(digits) in (10, 11) and digits[0] == "0" and digits[1] != "0"
        )
    if len(groups) == 5 and sizes == [2] * 5 and digits[0] == "0":
        return True  # 01 23 45 67 89
    if sizes == [1, 3, 3, 4] and digits[0] == "1" and digits[1] not in "01":
        return True  # 1-415-555-2671: the North American country code, written national
    if len(digits) not in (10, 11) or not 2 <= sizes[0] <= 5 or min(sizes[1:]) < 3:
        return False
    # 12 345 678 901 and 1.234.567.890 are amounts written in thousands.
    thousands = sizes[0] <= 3 and all(size == 3 for size in sizes[1:]) and "(" not in first
    return not thousands


def _span_kind(text: str, groups: list[str], sizes: list[int]) -> str | None:
    digits = _digits(text)
    if _is_card(text, digits):
        return "card"
    if _is_phone(groups, sizes, digits):
        return "phone"
    return None


def number_spans(run: str, *, bare_start: bool) -> Iterator[tuple[int, int, str]]:
    """Yield ``(start, end, kind)`` for each phone or card number in a digit run.

    Groups of digits may be left off the run's ends only where a space parts them (a
    room number before a phone number, a CVV after a card), never at a dash or dot, so
    a date, a uuid or an IP address is never cut into something that passes. A number
    starts with ``+`` or a group of two digits or more. ``bare_start`` is False when the
    run follows a letter, digit or one of ``NOT_BEFORE``: then its first group cannot
    start a number. Spans are tried longest first, with 8 to 19 digits only.
    """
    if " " not in run:  # no group can be left off: the run whole, or nothing
        digits = sum(ch.isdigit() for ch in run)
        least = MIN_NUMBER_DIGITS if run[0] == "+" else MIN_NATIONAL_DIGITS
        if bare_start and least <= digits <= MAX_NUMBER_DIGITS:
            texts = GROUP.findall(run)
            kind = _span_kind(run, texts, [len(text.strip("+()")) for text in texts])
            if kind:
                yield 0, len(run), kind
        return
    groups = list(GROUP.finditer(run))
    texts = [group.group() for group in groups]
    sizes = [sum(ch.isdigit() for ch in text) for text in texts]
    before = [0]
    for size in sizes:
        before.append(before[-1] + size)
    count = len(groups)
    start = 0
    while start < count:
        if (
            (start == 0 and not bare_start)
            or (start > 0 and run[groups[start].start() - 1] != " ")
            or (sizes[start] < 2 and not texts[start].startswith("+"))
        ):
            start += 1
            continue
        found = None
        for end in range(min(count, start + MAX_NUMBER_DIGITS), start, -1):
            digits = before[end] - before[start]
            if digits < (MIN_NUMBER_DIGITS if texts[start][0] == "+" else MIN_NATIONAL_DIGITS):
                break  # shorter spans have fewer digits still
            if digits > MAX_NUMBER_DIGITS or (end < count and run[groups[end - 1].end()] != " "):
                continue
            left, right = groups[start].start(), groups[end - 1].end()
            kind = _span_kind(run[left:right], texts[start:end], sizes[start:end])
            if kind:
                found = (left, right, kind, end)
                break
        if found is None:
            start += 1
            continue
        left, right, kind, start = found
        yield left, right, kind


def redact_numbers(text: str, wanted: frozenset[str]) -> str:
    """Return ``text`` with the phone and card numbers ``wanted`` names replaced."""
    out: list[str] = []
    last = 0
    for found in NUMBER_RUN.finditer(text):
        begin = found.start()
        bare = begin == 0 or text[begin - 1] not in NOT_BEFORE or text[begin] == "+"
        if bare and begin > 1 and text[begin - 1] == ":" and text[begin - 2].isdigit():
            bare = False  # the minutes of a time (10:00), not the "00" of a country code
        for left, right, kind in number_spans(found.group(), bare_start=bare):
            if kind in wanted:
                out.append(text[last : begin + left])
                out.append(mark(kind))
                last = begin + right
    if not out:
        return text
    out.append(text[last:])
    return "".join(out)


def _api_key(found: re.Match[str]) -> str:
    token = found.group()
    return mark("api_key") if any(ch.isdigit() for ch in token) else token


def _bearer(found: re.Match[str]) -> str:
    value = found.group("value")
    bare = "authoriz" not in found.group("head").lower()
    if bare and not SYMBOL_OR_DIGIT.search(value):
        return found.group()  # "bearer instruments": a word, not a token
    return found.group("head") + mark("bearer")


def _secret(found: re.Match[str]) -> str:
    value = found.group("value")
    if len(value) < 16 and not SYMBOL_OR_DIGIT.search(value):
        return found.group()  # "secret: something" in prose
    return found.group("head") + mark("secret")


def redact_email(text: str) -> str:
    """Return ``text`` with every e-mail address replaced."""
    return EMAIL.sub(mark("email"), text) if "@" in text else text


def redact_api_keys(text: str) -> str:
    """Return ``text`` with every key of a known issuer, and every JWT, replaced."""
    return API_KEY.sub(_api_key, text) if API_KEY_TRIGGER.search(text) else text


def may_hold_credentials(text: str) -> bool:
    """Return False when none of the api_key, bearer and secret detectors can match
    ``text`` (one scan: :data:`CREDENTIAL_TRIGGER`)."""
    return CREDENTIAL_TRIGGER.search(text) is not None


def names_a_credential(text: str) -> bool:
    """Return True when ``text`` holds a word the bearer and secret detectors start from
    (any case): the cheap test before their case-insensitive scans."""
    return WORDS_TRIGGER.search(text.lower()) is not None


def redact_bearer(text: str) -> str:
    """Return ``text`` with the credentials of Authorization headers and of
    ``Bearer <token>`` replaced, the header's name and scheme kept."""
    return BEARER.sub(_bearer, text)


def redact_cookies(text: str) -> str:
    """Return ``text`` with the values of ``Cookie:`` and ``Set-Cookie:`` headers replaced
    (to the end of the line or quoted string), the header's name kept."""
    return COOKIE.sub(_header_value, text) if "ookie" in text.lower() else text


def _header_value(found: re.Match[str]) -> str:
    return found.group("head") + mark("bearer")


def redact_userinfo(text: str) -> str:
    """Return ``text`` with the password of every ``scheme://user:password@host`` replaced,
    the user and host kept."""
    return USERINFO.sub(_userinfo, text) if "://" in text else text


def _userinfo(found: re.Match[str]) -> str:
    return found.group("head") + mark("secret")


@lru_cache(maxsize=4096)
def is_secret_key(key: str) -> bool:
    """Return True when a JSON object's ``key`` names a credential (:data:`SECRET_KEY`,
    camelCase parted: ``dbPassword`` as ``db_Password``)."""
    return SECRET_KEY.fullmatch(CAMEL_BOUNDARY.sub("_", key)) is not None


def redact_secrets(text: str) -> str:
    """Return ``text`` with the values of ``api_key=…``, ``token: …``, ``"password": "…"``
    and the like replaced, the name kept."""
    return SECRET.sub(_secret, text)


BUILT_IN = ("email", "phone", "card", "api_key", "bearer", "secret")
