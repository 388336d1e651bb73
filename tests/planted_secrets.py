"""A run with one secret of each kind the redaction policy knows planted in every text
field, for the tests that prove no export path lets one out (docs/redaction.md).

Use the ``planted_run`` fixture (tests/chat/conftest.py): it sets the operator pattern
:data:`CUSTOM_PATTERN` and returns a :class:`Planted`. A path's test exports the run and
asserts :func:`leaked` of the output is empty::

    def test_jsonl_lets_no_planted_secret_out(planted_run):
        text = export_jsonl(AgentRun.objects.filter(pk=planted_run.run.pk))
        assert leaked(text, planted_run) == []
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from django.contrib.auth.models import User
from django.utils import timezone

from chat.models import (
    AgentRun,
    AgentStep,
    Approval,
    Conversation,
    Feedback,
    Message,
)

CUSTOM_PATTERN = r"ACME-[0-9]{6}"

# Detector -> the secret as it is written in the text (what must never leave).
SECRETS: dict[str, list[str]] = {
    "email": ["planted.person@example.com"],
    "phone": ["+44 20 7946 0958", "(415) 555-2671", "13800138000"],
    "card": ["4111 1111 1111 1111", "3782-822463-10005"],
    "api_key": [
        "sk-proj-Pl4ntedOpenAIkey0123456789abcd",
        "sk-ant-api03-Pl4ntedAnthropicKey0123456789",
        "ghp_Pl4ntedGitHubToken0123456789abcdefghij",
        "github_pat_11Pl4ntedFineGrained0123456789",
        "AKIAPL4NTEDEXAMPLE12",
        "xoxb-1234567890-Pl4ntedSlack",
        "AIzaPl4ntedGoogleKey0123456789abcdefghi",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwbGFudGVkIn0.Pl4ntedSignature012",
    ],
    "bearer": ["Pl4ntedBearerT0ken.abc-123"],
    "secret": ["Pl4nted-Passw0rd!"],
    "custom": ["ACME-424242"],
}
# The text planted in every free-text field: each secret in a sentence around it.
TEXT = (
    "Write to planted.person@example.com or call +44 20 7946 0958, (415) 555-2671 or "
    "13800138000. Card 4111 1111 1111 1111, amex 3782-822463-10005. Keys: "
    "sk-proj-Pl4ntedOpenAIkey0123456789abcd sk-ant-api03-Pl4ntedAnthropicKey0123456789 "
    "ghp_Pl4ntedGitHubToken0123456789abcdefghij github_pat_11Pl4ntedFineGrained0123456789 "
    "AKIAPL4NTEDEXAMPLE12 xoxb-1234567890-Pl4ntedSlack "
    "AIzaPl4ntedGoogleKey0123456789abcdefghi "
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwbGFudGVkIn0.Pl4ntedSignature012\n"
    "Authorization: Bearer Pl4ntedBearerT0ken.abc-123\npassword=Pl4nted-Passw0rd! "
    "order ACME-424242 on 2026-12-03 at 17:46, 59.90 EUR."
)
# In JSON values: a credential under a key that names one, a card as a JSON number, and
# secrets written as keys (an address book keyed by e-mail, a key as a dict's key).
KEYED_SECRET = "Pl4ntedKeyedValue"
CARD_NUMBER = 5555555555554444
EMAIL_KEY = "key.holder@example.com"
API_KEY_KEY = "sk-proj-Pl4ntedKeyAsAKey0123456789ab"
USERNAME = "planted.owner@example.com"
DECIDER = "planted.decider@example.com"


@dataclass
class Planted:
    """The run, and every planted secret as it would appear if it leaked."""

    run: AgentRun
    secrets: list[str] = field(default_factory=list)


def planted_json() -> dict:
    """Return a JSON value holding every planted secret: as text, under a key that names
    a credential, nested in a list, a card number as a JSON number, and as keys."""
    return {"note": TEXT, "api_key": KEYED_SECRET, "card": CARD_NUMBER, "more": [TEXT, 1],
            EMAIL_KEY: "owner", API_KEY_KEY: 1}  # fmt: skip


def all_secrets() -> list[str]:
    """Return every planted string that must not leave (JSON forms included)."""
    found = [secret for secrets in SECRETS.values() for secret in secrets]
    return [*found, KEYED_SECRET, str(CARD_NUMBER), EMAIL_KEY, API_KEY_KEY, USERNAME, DECIDER]


def plant_secrets() -> Planted:
    """Store a succeeded run with :data:`TEXT` (or :func:`planted_json`) in every text
    field: the conversation's title, its owner's username (an e-mail address), the
    question and the answer messages, the run's output and error, a model turn (text,
    reasoning, result, error, raw), a tool call held for approval and approved with
    edited arguments (arguments, result, observation, error, artifact, the approval's
    arguments, reason and decider) and the feedback's comment.
    """
    now = timezone.now()
    owner = User.objects.create_user(USERNAME)
    conversation = Conversation.objects.create(owner=owner, title=TEXT[:200])
    question = Message.objects.create(conversation=conversation, role="user", content=TEXT)
    run = AgentRun.objects.create(
        conversation=conversation, user_message=question, strategy="tool_calling",
        provider="demo", model_name="demo-scripted", status="succeeded", started_at=now,
        finished_at=now + timedelta(seconds=3), duration_ms=3000, iterations=2,
        output=TEXT, error=TEXT, tool_call_count=1, input_tokens=10, output_tokens=5,
        total_tokens=15,
    )  # fmt: skip
    AgentStep.objects.create(
        run=run, ordinal=1, iteration=1, kind="model_turn", status="success",
        started_at=now, finished_at=now + timedelta(seconds=1), duration_ms=1000,
        text=TEXT, reasoning=TEXT, error=TEXT, input_tokens=6, output_tokens=3,
        total_tokens=9,
        raw={"content": TEXT, "tool_calls": [
            {"name": "lookup", "id": "call_planted", "args": planted_json()}
        ]},
    )  # fmt: skip
    call = AgentStep.objects.create(
        run=run, ordinal=2, iteration=1, kind="tool_call", status="success",
        tool_name="lookup", tool_call_id="call_planted", arguments=planted_json(),
        result=TEXT, observation=TEXT, error=TEXT, text=TEXT, artifact=planted_json(),
        started_at=now + timedelta(seconds=1), finished_at=now + timedelta(seconds=2),
        duration_ms=1000,
    )  # fmt: skip
    Approval.objects.create(
        run=run, step=call, tool_name="lookup", tool_call_id="call_planted",
        arguments=planted_json(), edited_arguments=planted_json(), outcome="approved",
        requested_at=now + timedelta(seconds=1), decided_at=now + timedelta(seconds=1),
        decided_by_name=DECIDER, reason=TEXT,
    )  # fmt: skip
    AgentStep.objects.create(
        run=run, ordinal=3, iteration=2, kind="model_turn", status="success",
        started_at=now + timedelta(seconds=2), finished_at=now + timedelta(seconds=3),
        duration_ms=1000, text=TEXT, result=TEXT, reasoning=TEXT, input_tokens=4,
        output_tokens=2, total_tokens=6, raw={"content": TEXT},
    )  # fmt: skip
    Message.objects.create(conversation=conversation, role="assistant", content=TEXT, run=run)
    Feedback.objects.create(
        run=run, rating="down", comment=TEXT, given_by=owner, given_by_name=USERNAME,
        created_at=now, updated_at=now,
    )  # fmt: skip
    return Planted(run=run, secrets=all_secrets())


def leaked(text: str, planted: Planted) -> list[str]:
    """Return the planted secrets found in ``text`` (an export's whole output)."""
    return [secret for secret in planted.secrets if secret in text]
