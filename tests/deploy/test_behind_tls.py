"""Behind a TLS proxy: the settings docs/deploy.md gives, read from the environment.

Each setting is read by ``project/settings.py`` in a subprocess from the example
environment file in docs/deploy.md (so a setting the settings module does not read
fails here), then applied to this process to see what it does to a response or a
websocket. No shared deployment needed.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.chat.conftest import Communicator

ROOT = Path(__file__).resolve().parents[2]
DEPLOY_DOC = ROOT / "docs" / "deploy.md"

TLS_SETTINGS = (
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
    "SECURE_PROXY_SSL_HEADER",
    "SECURE_SSL_REDIRECT",
    "ALLOWED_HOSTS",
)
SITE = "chat.example.com"


def documented_environment() -> dict[str, str]:
    """Return the variables of docs/deploy.md's example ``/etc/agentchat/env``, with a
    random secret key in place of the placeholder."""
    blocks = re.findall(r"```sh\n# /etc/agentchat/env\n(.*?)```", DEPLOY_DOC.read_text(), re.S)
    assert len(blocks) == 1, "docs/deploy.md has one example /etc/agentchat/env"
    env = dict(line.split("=", 1) for line in blocks[0].splitlines() if "=" in line)
    env["DJANGO_SECRET_KEY"] = secrets.token_urlsafe(50)
    return env


def clean_environment(**env: str) -> dict[str, str]:
    """Return this process's environment without any setting of a deployment, plus ``env``."""
    kept = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("DJANGO_", "DATABASE_", "REDIS_"))
    }
    return {**kept, "DJANGO_SETTINGS_MODULE": "project.settings", **env}


def settings_read_from(env: dict[str, str]) -> dict[str, object]:
    """Return the TLS settings ``project/settings.py`` makes of ``env`` (run apart)."""
    code = (
        "import json, django; django.setup(); from django.conf import settings; "
        f"print(json.dumps({{n: getattr(settings, n) for n in {TLS_SETTINGS!r}}}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=clean_environment(**env),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    read = json.loads(result.stdout)
    if read["SECURE_PROXY_SSL_HEADER"] is not None:
        read["SECURE_PROXY_SSL_HEADER"] = tuple(read["SECURE_PROXY_SSL_HEADER"])
    return read


@pytest.fixture(scope="module")
def documented() -> dict[str, object]:
    """The TLS settings of docs/deploy.md's environment."""
    return settings_read_from(documented_environment())


@pytest.fixture(scope="module")
def unset() -> dict[str, object]:
    """The TLS settings with none of the variables set (`make run`)."""
    return settings_read_from({})


@pytest.fixture
def behind_tls(settings, documented):
    """Apply docs/deploy.md's TLS settings to this process."""
    for name, value in documented.items():
        setattr(settings, name, value)
    return settings


def manage_py_check_deploy(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy"], cwd=ROOT,
        env=clean_environment(**env), capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_check_deploy_finds_no_issue_with_the_environment_docs_deploy_md_gives():
    result = manage_py_check_deploy(documented_environment())
    assert result.returncode == 0, result.stderr
    assert "System check identified no issues" in result.stdout, result.stderr


def test_check_deploy_names_each_missing_tls_setting_and_the_development_key():
    result = manage_py_check_deploy({})
    for warning in ("W004", "W008", "W009", "W012", "W016"):
        assert f"security.{warning}" in result.stderr


def test_the_documented_environment_sets_every_tls_setting(documented):
    assert documented == {
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
        "SECURE_HSTS_SECONDS": 31536000,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": True,
        "SECURE_HSTS_PRELOAD": True,
        "SECURE_PROXY_SSL_HEADER": ("HTTP_X_FORWARDED_PROTO", "https"),
        "SECURE_SSL_REDIRECT": True,
        "ALLOWED_HOSTS": [SITE],
    }


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DJANGO_SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto: https"},
         "DJANGO_SECURE_PROXY_SSL_HEADER must be a header name such as X-Forwarded-Proto"),
        ({"DJANGO_SECURE_HSTS_SECONDS": "-1"}, "DJANGO_SECURE_HSTS_SECONDS must be at least 0"),
        ({"DJANGO_SESSION_COOKIE_SECURE": "yes please"},
         "DJANGO_SESSION_COOKIE_SECURE must be true or false"),
    ],
)  # fmt: skip
def test_a_bad_tls_setting_stops_start_up_naming_it(env, message):
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"], cwd=ROOT,
        env=clean_environment(**env), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert message in result.stderr


def https_client(**extra) -> Client:
    """A client whose requests come through nginx as the example site sends them."""
    return Client(HTTP_HOST=SITE, HTTP_X_FORWARDED_PROTO="https", **extra)


@pytest.mark.django_db
def test_the_session_and_csrf_cookies_carry_secure(behind_tls):
    User.objects.create_user("alice", password="pw")
    client = https_client()
    response = client.get("/accounts/login/")
    assert response.status_code == 200
    assert response.cookies["csrftoken"]["secure"] is True
    response = client.post("/accounts/login/", {"username": "alice", "password": "pw"})
    assert response.status_code == 302
    assert response.cookies["sessionid"]["secure"] is True


@pytest.mark.django_db
def test_hsts_is_sent_over_https_as_the_proxy_header_says(behind_tls):
    response = https_client().get("/accounts/login/")
    assert response.status_code == 200
    assert response.wsgi_request.is_secure()
    assert response["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload"


@pytest.mark.django_db
def test_plain_http_is_redirected_to_https_without_hsts_and_healthz_is_not(behind_tls):
    client = Client(HTTP_HOST=SITE)
    response = client.get("/accounts/login/?next=/c/1/")
    assert response.status_code == 301
    assert response["Location"] == f"https://{SITE}/accounts/login/?next=/c/1/"
    assert "Strict-Transport-Security" not in response
    assert client.get("/healthz").status_code == 200


@pytest.mark.django_db
def test_with_nothing_set_plain_http_is_left_alone_and_the_header_not_trusted(settings, unset):
    for name, value in unset.items():
        setattr(settings, name, value)
    assert unset["SECURE_PROXY_SSL_HEADER"] is None and unset["SECURE_HSTS_SECONDS"] == 0
    User.objects.create_user("alice", password="pw")
    client = Client(HTTP_X_FORWARDED_PROTO="https")  # a client's claim, not a proxy's
    response = client.get("/accounts/login/")
    assert response.status_code == 200
    assert not response.wsgi_request.is_secure()
    assert "Strict-Transport-Security" not in response
    assert not response.cookies["csrftoken"]["secure"]
    response = client.post("/accounts/login/", {"username": "alice", "password": "pw"})
    assert response.status_code == 302
    assert not response.cookies["sessionid"]["secure"]


@pytest.mark.django_db(transaction=True)
async def test_the_live_connection_opens_behind_the_proxy_with_the_secure_session(behind_tls):
    """What the browser sends through nginx: ``wss``, the https Origin, the site's Host and
    the Secure session cookie it got over https."""
    client = https_client()
    response = await asyncio.to_thread(client.get, "/", follow=True)
    assert response.status_code == 200
    assert client.cookies["sessionid"]["secure"] is True
    conversation = response.context["conversation"]

    from project.asgi import application

    def socket(origin: bytes) -> Communicator:
        communicator = Communicator(
            application,
            f"/ws/chat/{conversation.pk}/",
            headers=[
                (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()),
                (b"origin", origin),
                (b"host", SITE.encode()),
                (b"x-forwarded-proto", b"https"),
            ],
        )
        communicator.scope["scheme"] = "wss"  # Daphne's --proxy-headers
        return communicator

    page = socket(f"https://{SITE}".encode())
    connected, _ = await page.connect()
    assert connected
    await page.receive_nothing()  # not closed: the origin and the session passed
    await page.disconnect()

    elsewhere = socket(b"https://evil.example.net")
    await elsewhere.connect()
    assert await elsewhere.receive_output() == {"type": "websocket.close", "code": 4403}
    await elsewhere.disconnect()
