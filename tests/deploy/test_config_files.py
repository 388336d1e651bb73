"""The example deployment files of deploy/ are valid for the tools that read them.

``nginx -t`` checks the site inside a minimal nginx.conf of a temporary prefix (with a
self-signed certificate in place of the example's); ``systemd-analyze verify`` checks the
units with their paths pointed at this checkout. Without nginx the test skips (fails under
``REQUIRE_SHARED_DEPLOYMENT=1``: ``make deploy-deps`` installs it); without systemd the
units are still read as INI files for the keys they cannot do without.
"""

from __future__ import annotations

import configparser
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from scripts.serving import nginx_binary
from tests.deploy.shared import skip_or_fail

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
SITE = DEPLOY / "nginx" / "agentchat.conf"
UNITS = DEPLOY / "systemd"
INSTALL_DIR = "/srv/agentchat"

NGINX_CONF = """\
pid {prefix}/nginx.pid;
error_log {prefix}/error.log;
events {{}}
http {{
    {mime}
    access_log {prefix}/access.log;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
    include {prefix}/agentchat.conf;
}}
"""


def self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    """Write a throwaway certificate and key with openssl; return their paths."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=chat.example.com", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


def test_the_nginx_site_passes_nginx_t(tmp_path):
    binary = nginx_binary()
    if binary is None:
        skip_or_fail("nginx is not installed: make deploy-deps installs it")
    if shutil.which("openssl") is None:
        skip_or_fail("openssl is not installed (a certificate for the check is made with it)")
    cert, key = self_signed_certificate(tmp_path)
    site = SITE.read_text()
    site = re.sub(r"ssl_certificate\s+\S+;", f"ssl_certificate {cert};", site)
    site = re.sub(r"ssl_certificate_key\s+\S+;", f"ssl_certificate_key {key};", site)
    (tmp_path / "agentchat.conf").write_text(site)
    mime = "include /etc/nginx/mime.types;" if Path("/etc/nginx/mime.types").exists() else ""
    (tmp_path / "nginx.conf").write_text(NGINX_CONF.format(prefix=tmp_path, mime=mime))
    result = subprocess.run(
        [binary, "-t", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf"), "-e", "stderr"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "test is successful" in result.stderr
    assert "[warn]" not in result.stderr, result.stderr


def test_the_nginx_site_passes_what_the_websocket_and_django_need():
    site = SITE.read_text()
    for line in (
        "proxy_set_header Upgrade $http_upgrade;",
        "proxy_set_header Connection $agentchat_connection;",
        "proxy_set_header Host $http_host;",
        "proxy_set_header X-Forwarded-Proto $scheme;",
        "proxy_http_version 1.1;",
    ):
        assert line in site
    # A location that sets any header would inherit none of the server's.
    for location in re.findall(r"location [^{]+\{(.*?)\}", site, re.S):
        assert "proxy_set_header" not in location


def read_unit(path: Path) -> configparser.ConfigParser:
    """Read a systemd unit as INI (repeated keys such as ExecStart keep the last)."""
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # keys are case-sensitive in systemd
    parser.read_string(path.read_text())
    return parser


@pytest.mark.parametrize(
    ("name", "required"),
    [
        ("agentchat@.service", {"Unit": ["Description", "Requires"],
                                "Service": ["ExecStart", "User", "EnvironmentFile", "KillSignal"],
                                "Install": ["WantedBy"]}),
        ("agentchat-runowner@.service", {"Unit": ["Description", "Requires"],
                                          "Service": ["ExecStart", "User", "EnvironmentFile",
                                                      "KillSignal"],
                                          "Install": ["WantedBy"]}),
        ("agentchat-migrate.service", {"Unit": ["Description"],
                                       "Service": ["ExecStart", "Type", "EnvironmentFile"],
                                       "Install": ["WantedBy"]}),
        ("agentchat.target", {"Unit": ["Description", "Wants"], "Install": ["WantedBy"]}),
    ],
)  # fmt: skip
def test_each_unit_has_the_keys_it_cannot_do_without(name, required):
    unit = read_unit(UNITS / name)
    for section, keys in required.items():
        for key in keys:
            assert unit.get(section, key, fallback=""), f"{name}: [{section}] {key}"


def test_the_target_starts_a_process_on_each_port_nginx_sends_to():
    wants = read_unit(UNITS / "agentchat.target").get("Unit", "Wants").split()
    ports = sorted(
        int(m.group(1)) for w in wants if (m := re.fullmatch(r"agentchat@(\d+)\.service", w))
    )
    upstream = re.search(r"upstream agentchat \{(.*?)\}", SITE.read_text(), re.S).group(1)
    assert ports and ports == sorted(int(p) for p in re.findall(r"127\.0\.0\.1:(\d+)", upstream))
    assert "agentchat-migrate.service" in wants


def test_the_units_pass_systemd_analyze_verify(tmp_path):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (the INI checks above still ran)")
    env_file = tmp_path / "env"
    env_file.write_text("DJANGO_SECRET_KEY=check-only\n")
    for unit in UNITS.iterdir():
        text = unit.read_text().replace(INSTALL_DIR, str(ROOT))
        text = text.replace("/etc/agentchat/env", str(env_file))
        (tmp_path / unit.name).write_text(text)
    names = ["agentchat@8001.service", "agentchat-runowner@1.service",
             "agentchat-migrate.service", "agentchat.target"]  # fmt: skip
    result = subprocess.run(
        [analyze, "verify", *(str(tmp_path / name) for name in names)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    # Unknown keys and bad values are only warnings: any line is a finding.
    assert result.stderr.strip() == "", result.stderr


def test_every_way_of_serving_the_app_gives_daphne_the_same_options():
    from scripts.serving import DAPHNE_OPTIONS

    options = " ".join(DAPHNE_OPTIONS)
    exec_start = read_unit(UNITS / "agentchat@.service").get("Service", "ExecStart")
    makefile = (DEPLOY.parent / "Makefile").read_text()
    assert options in exec_start
    assert f"DAPHNE_OPTIONS := {options}" in makefile
    assert re.search(r"daphne \$\(DAPHNE_OPTIONS\)", makefile)
