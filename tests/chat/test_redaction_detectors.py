"""The redaction policy's detectors: what each catches and what it must leave alone, the
operator's patterns, JSON values, and the settings refused at start-up."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from chat.traces.detectors import BUILT_IN, luhn_ok
from chat.traces.redaction import Redactor, active, redactor_from
from tests.timing import WAIT_S

ALL = Redactor(BUILT_IN)


def only(name: str) -> Redactor:
    return Redactor([name])


JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
# (detector, the text around the secret, the secret)
CAUGHT = [
    ("email", "write to {}.", "alice.smith+tag@example.co.uk"),
    ("email", "联系我{}谢谢", "alice@example.com"),
    ("email", "<{}>", "bob_o'neil@mail-host.example.org"),
    ("phone", "call {} now", "+1 (415) 555-2671"),
    ("phone", "tel:{}", "+441632960983"),
    ("phone", "{}", "+86 138 0013 8000"),
    ("phone", "{}", "0044 20 7946 0958"),
    ("phone", "US {}.", "(415) 555-2671"),
    ("phone", "{} or", "415-555-2671"),
    ("phone", "{}", "415.555.2671"),
    ("phone", "London {}", "020 7946 0958"),
    ("phone", "mobile {}", "07700 900123"),
    ("phone", "手机 {}", "13800138000"),
    ("phone", "北京 {}", "010-12345678"),
    ("phone", "Paris {}", "01 23 45 67 89"),
    ("phone", "room 12 {} call", "415 555 2671"),
    ("card", "visa {} exp 12/28", "4111 1111 1111 1111"),
    ("card", "{}", "4111-1111-1111-1111"),
    ("card", "mc {}.", "5555555555554444"),
    ("card", "amex {} cvv 1234", "3782 822463 10005"),
    ("api_key", "OPENAI_API_KEY {}", "sk-proj-abcDEF1234567890abcdef1234"),
    ("api_key", "legacy {}", "sk-abcdefghij1234567890ABCDEFGHIJ"),
    ("api_key", "{}", "sk-ant-api03-AbCdEf0123456789-_xyzXYZ"),
    ("api_key", "{}", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
    ("api_key", "{}", "github_pat_11ABCDEFG0123456789_abcdefghijklmn"),
    ("api_key", "aws {} key", "AKIAIOSFODNN7EXAMPLE"),
    ("api_key", "{}", "xoxb-123456789012-abcdefghij"),
    ("api_key", "{}", "AIzaSyA1234567890abcdefghijklmnopqrstu"),
    ("api_key", "{}", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
    ("api_key", "{}", "hf_abcdefghijklmnopqrstuvwxyz012345"),
    ("api_key", "jwt {}", JWT),
    ("phone", "call {}", "1-415-555-2671"),
    ("phone", "call {} now", "1-800-555-0199"),
    ("bearer", "Authorization: Bearer {}", "abc.def-123456789"),
    ("bearer", "Authorization: ApiKey {}", "Pl4ntedKeyValue0123"),
    ("bearer", "Authorization: OAuth {}", "Pl4ntedOAuthTok123"),
    ("bearer", "Authorization: Splunk {}", "1a2b3c4d-5e6f-7a8b"),
    ("bearer", "Authorization: Negotiate {}", "YIIGhgYGKwYBBQUCoIIGejCCBnag"),
    ("bearer", 'Authorization: Digest username="bob", response="{}"', "6629fae49393a05397450978"),
    (
        "bearer",
        "Authorization: AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/"
        "aws4_request, SignedHeaders=host;x-amz-date, Signature={}",
        "5d672d79c15b13162d9279b0855cfba6789a8edb4c82c4",
    ),
    ("bearer", "bearer={}", "abc123def456"),
    ("bearer", "Bearer: {}", "abc123def456"),
    ("bearer", "Cookie: {}\nAccept: */*", "sessionid=abc123; theme=dark"),
    ("bearer", "Set-Cookie: {}", "id=a3fWa; Expires=Thu, 21 Oct 2021 07:28:00 GMT"),
    ("bearer", "authorization: Basic {}", "dXNlcjpwYXNzd29yZA=="),
    ("bearer", "curl -H 'Bearer {}'", "0123456789abcdef"),
    ("secret", "api_key={}", "abcd1234efgh"),
    ("secret", 'token: "{}"', "xyz98765432"),
    ("secret", '{{"password": "{}"}}', "hunter2hunter2"),
    ("secret", "DB_PASSWORD={}", "correct-horse"),
    ("secret", "client_secret: {}", "averyveryverylongsecretvalue"),
    ("secret", "AWS_SECRET_ACCESS_KEY={}", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("secret", "aws_secret_access_key = {}", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("secret", "dbPassword={}", "Pl4nted-pw0rd"),
    ("secret", "const openaiApiKey = '{}';", "Pl4ntedKeyValue0123"),
    ("secret", "https://user:{}@host.example/", "s3cret-pw"),
    ("secret", "postgres://admin:{}@db:5432/app", "hunter2"),
]


@pytest.mark.parametrize(("detector", "around", "secret"), CAUGHT)
def test_each_detector_replaces_what_it_catches_with_its_named_mark(detector, around, secret):
    text = around.format(secret)
    redacted = only(detector).text(text)

    assert secret not in redacted
    assert f"[REDACTED:{detector}]" in redacted
    assert ALL.text(text).count("[REDACTED:") == 1  # no other detector takes it too


def test_a_header_and_an_assignment_keep_their_names_so_a_reader_sees_what_went():
    assert ALL.text("Authorization: Bearer abc.def-123456789") == (
        "Authorization: Bearer [REDACTED:bearer]"
    )
    assert ALL.text("api_key=abcd1234efgh;") == "api_key=[REDACTED:secret];"


def test_an_authorization_header_keeps_any_scheme_and_loses_all_its_credentials():
    assert ALL.text('Authorization: Digest username="bob", response="6629fae4"') == (
        "Authorization: Digest [REDACTED:bearer]"
    )
    assert ALL.text("Authorization: Negotiate YIIGhgYGKwYBBQUCoIIG") == (
        "Authorization: Negotiate [REDACTED:bearer]"
    )


@pytest.mark.parametrize(
    "text",
    [
        "2026-12-03", "03/12/2026", "12.03.2026", "2026/12/03", "3 Dec 2026",
        "2026-12-03T17:46:16.123Z", "2026-12-03 17:46:16", "2026-12-03T17:46:16+08:00",
        "17:46:16", "17:46", "at 09:30-10:45",
        "$1,234.56", "1 234 567,89 €", "€ 1.234.567,89", "12 345 678 901", "1.234.567.890",
        "¥ 12,345,678", "59.90 EUR", "3.14159265358979",
        "CA1234", "BA 117", "UA 2471", "flight LH400 at gate 23",
        "123e4567-e89b-12d3-a456-426614174000", "12345678-1234-1234-1234-123456789012",
        "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "da39a3ee5e6b4b0d3255bfef95601890afd80709", "call_abc123DEF456ghi789",
        "order #12345678901", "id 1733247976123", "epoch 1733247976", "ip 192.168.100.200",
        "10.100.200.300", "ISBN 978-3-16-148410-0", "v1.2.3.4", "+20 °C", "page 1-2-3",
        "a 16-digit id 1234567890123456 that fails Luhn",
        "https://example.com/orders/4155552671", "sk-learn-is-a-python-library-name",
        "the task-based approach", "ask-me-anything-please-now", "secret: something",
        "the password: is never shared", "bearer bonds and bearer instruments",
        "max tokens: 4096", "token_count=123456789", "see @alice on chat", "user@localhost",
        "C:\\Users\\alice\\AppData", "北京, 晴转多云: 21°C, humidity 40%, wind 3 m/s",
        "[REDACTED:email]",
        "10:00 - 2026-12-03", "check-in 2026-12-24 15:00 - 2026-12-26 11:00",
        "10:00 2026-12-03 11:00 2026-12-04", "(10:00) (2026-12-03)",
        "the cookie: chocolate chip", "https://example.com:8080/a@b", "maxTokens: 4096",
    ],
)  # fmt: skip
def test_dates_times_prices_ids_and_digests_survive(text):
    assert ALL.text(text) == text


def test_the_luhn_check_is_the_standard_one():
    assert luhn_ok("4111111111111111")
    assert luhn_ok("378282246310005")
    assert not luhn_ok("4111111111111112")


def test_a_card_number_that_fails_luhn_or_starts_like_no_card_is_left():
    assert ALL.text("4111 1111 1111 1112") == "4111 1111 1111 1112"
    assert ALL.text("1111 1111 1111 1117") == "1111 1111 1111 1117"  # Luhn, but no card


def test_only_the_detectors_named_run():
    text = "alice@example.com 4111 1111 1111 1111"
    assert only("email").text(text) == "[REDACTED:email] 4111 1111 1111 1111"
    assert only("card").text(text) == "alice@example.com [REDACTED:card]"
    assert Redactor().text(text) == text


def test_operator_patterns_are_marked_custom_after_the_built_ins():
    redactor = redactor_from(["email"], [r"ACME-[0-9]{6}", r"(?i)project\s+falcon"])

    text = "ACME-123456 and Project  Falcon, mail a@example.com"
    assert redactor.text(text) == "[REDACTED:custom] and [REDACTED:custom], mail [REDACTED:email]"


def test_an_operator_pattern_never_re_marks_a_built_in_mark():
    redactor = redactor_from(["email"], [r"\b[A-Z]{6,}\b", r"RED"])

    assert redactor.text("mail alice@example.com about PROJECTX") == (
        "mail [REDACTED:email] about [REDACTED:custom]"
    )


def test_a_backtracking_operator_pattern_redacts_the_value_whole_within_its_time_out():
    # Run in a child with a time-out: were the search unbounded, it would freeze (re and
    # regex hold the GIL) this process, and pytest's own time-out with it.
    code = (
        "import logging, sys; logging.basicConfig(stream=sys.stderr); "
        "from chat.traces.redaction import redactor_from; "
        "nested = redactor_from(['email'], [r'(\\w+\\s?)+$']); "
        "hostile = redactor_from(['email'], [r'(a|a)+$']); "
        "print(nested.text('a' * 29 + '!')); print(hostile.text('a' * 40 + '!')); "
        "print(hostile.text('b' * 40 + '!')); print(hostile.text('a' * 41 + '!'))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=WAIT_S)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "a" * 29 + "!", "[REDACTED:custom]", "b" * 40 + "!", "[REDACTED:custom]"
    ]  # fmt: skip
    assert done.stderr.count("took longer than") == 1  # once per pattern
    assert "(a|a)+$" in done.stderr


def test_none_switches_the_built_ins_off_and_leaves_operator_patterns():
    redactor = redactor_from(["none"], [r"ACME-[0-9]{6}"])

    assert redactor.text("a@example.com ACME-123456") == "a@example.com [REDACTED:custom]"
    assert not redactor_from(["none"], []).enabled


@pytest.mark.parametrize(
    ("names", "patterns", "message"),
    [
        (["email", "phones"], [], "TRACE_REDACT names 'phones'"),
        (["none", "email"], [], "TRACE_REDACT names 'none'"),
        ([], ["ok", "[a-"], "pattern 2 ('[a-') does not compile"),
        ([], ["a*"], "pattern 1 ('a*') matches the empty string"),
        ([], [""], "pattern 1 must be a non-empty string"),
    ],
)
def test_a_bad_detector_name_or_pattern_is_refused_naming_it(names, patterns, message):
    with pytest.raises(ImproperlyConfigured, match=re.escape(message)):
        redactor_from(names, patterns)


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"TRACE_REDACT": "email,cards"}, "TRACE_REDACT names 'cards'"),
        ({"TRACE_REDACT_PATTERNS": '["(unclosed"]'}, "pattern 1 ('(unclosed') does not compile"),
        ({"TRACE_REDACT_PATTERNS": "ACME-[0-9]+"}, "TRACE_REDACT_PATTERNS must be a JSON array"),
        ({"TRACE_REDACT_PATTERNS": '{"a": 1}'}, "TRACE_REDACT_PATTERNS must be a JSON array"),
    ],
)
def test_start_up_stops_on_a_bad_policy_in_the_environment(variables, message):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "project.settings", **variables}
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        capture_output=True, text=True, env=env, timeout=WAIT_S,
    )  # fmt: skip
    assert done.returncode != 0
    assert "ImproperlyConfigured" in done.stderr
    assert message in done.stderr


def test_the_environment_sets_the_policy(monkeypatch):
    env = {
        **os.environ, "DJANGO_SETTINGS_MODULE": "project.settings",
        "TRACE_REDACT": "email, card", "TRACE_REDACT_PATTERNS": '["ACME-[0-9]{6}"]',
    }  # fmt: skip
    code = (
        "import django; django.setup(); from chat.traces.redaction import active; "
        "print(active().text('a@b.example 4111111111111111 +44 20 7946 0958 ACME-123456'))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=WAIT_S)  # fmt: skip
    assert done.stdout.strip() == (
        "[REDACTED:email] [REDACTED:card] +44 20 7946 0958 [REDACTED:custom]"
    )


def test_active_follows_the_settings_and_defaults_to_every_built_in(settings):
    assert active().detectors == BUILT_IN
    settings.TRACE_REDACT = ["none"]
    settings.TRACE_REDACT_PATTERNS = []
    assert not active().enabled


def test_json_values_redact_keys_strings_numbers_and_credentials():
    value = {
        "to": "a@example.com",
        "a@example.com": "key redacted too",
        "api_key": "short",
        "nested": {"password": 123456, "list": ["4111 1111 1111 1111", 3, 2.5, True, None]},
        "card": 4111111111111111,
        "count": 4111111111111112,
        "token": {"kind": "opaque"},
        "empty_password": {"password": ""},
        "headers": {"Authorization": "Basic dXNlcjpwYXNz", "OPENAI_API_KEY": "k"},
        "token_count": 123,
    }

    assert ALL.value(value) == {
        "to": "[REDACTED:email]",
        "[REDACTED:email]": "key redacted too",
        "api_key": "[REDACTED:secret]",
        "nested": {
            "password": "[REDACTED:secret]", "list": ["[REDACTED:card]", 3, 2.5, True, None]
        },
        "card": "[REDACTED:card]",
        "count": 4111111111111112,
        "token": {"kind": "opaque"},
        "empty_password": {"password": ""},
        "headers": {"Authorization": "[REDACTED:secret]", "OPENAI_API_KEY": "[REDACTED:secret]"},
        "token_count": 123,
    }  # fmt: skip
    assert value["to"] == "a@example.com"  # the input is not changed


def test_keys_that_redact_to_the_same_mark_are_all_kept_numbered():
    value = {"a@example.com": 1, "b@example.com": 2, "[REDACTED:email] (2)": 3, "c@d.example": 4}

    assert ALL.value(value) == {
        "[REDACTED:email]": 1, "[REDACTED:email] (2)": 2, "[REDACTED:email] (2) (2)": 3,
        "[REDACTED:email] (3)": 4,
    }  # fmt: skip


@pytest.mark.parametrize(
    "key",
    ["dbPassword", "userPassword", "openaiApiKey", "githubToken", "sessionToken",
     "secretAccessKey", "aws_secret_access_key", "AWS_ACCESS_KEY"],
)  # fmt: skip
def test_a_credential_key_after_a_camel_case_or_snake_case_prefix_hides_its_value(key):
    assert ALL.value({key: "hunter2"}) == {key: "[REDACTED:secret]"}


@pytest.mark.parametrize("key", ["tokenCount", "maxTokens", "keyboard", "passwordHint"])
def test_a_key_that_only_contains_a_credential_word_keeps_its_value(key):
    assert ALL.value({key: "hunter2"}) == {key: "hunter2"}


def test_a_json_string_that_is_not_an_object_is_redacted_as_text():
    assert ALL.value("call 415-555-2671") == "call [REDACTED:phone]"
    assert ALL.value(None) is None


def test_text_passes_what_is_not_a_string_through():
    assert ALL.text(None) is None
    assert ALL.text(4111111111111111) == 4111111111111111  # value() is for JSON numbers


@pytest.mark.parametrize(
    "text",
    [
        "1" * 200_000 + ":",
        ("1 " * 100_000) + ":",
        ("11 " * 70_000) + ":",
        "+1 " * 70_000,
        "a" * 200_000 + "@",
        "token=" + "x" * 200_000,
        "Bearer " * 30_000,
        "-".join(["1234"] * 50_000),
        "cookie: " * 30_000,
        "Authorization: Digest " + "a=b, " * 40_000 + "!",
        'Authorization: Digest a="' + "b" * 200_000,
        "Authorization: " + "a " * 100_000,
        "aB" * 100_000 + "Password",
        "https://" + "u:" * 100_000 + "@",
    ],
)
def test_long_hostile_text_takes_linear_time(text):
    # Quadratic backtracking on 200,000 characters would take minutes; this runs in well
    # under a second. Asserted by finishing: pytest's own time-out is the guard.
    ALL.text(text)


def test_the_policy_imports_before_django_is_set_up():
    # project/settings.py imports it to refuse a bad policy: it must not need the apps.
    code = (
        "import sys; import chat.traces.redaction, chat.traces.detectors; "
        "assert not any(m.startswith(('django.db', 'django.apps', 'chat.models')) "
        "for m in sys.modules), sorted(m for m in sys.modules if m.startswith('django'))"
    )
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=WAIT_S)  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_a_pattern_compiled_with_re_is_searched_with_the_time_out_and_its_flags():
    redactor = Redactor([], [re.compile("project falcon", re.IGNORECASE), re.compile(r"(a|a)+$")])

    assert redactor.text("Project FALCON") == "[REDACTED:custom]"
    assert redactor.text("a" * 40 + "!") == "[REDACTED:custom]"  # timed out: whole
