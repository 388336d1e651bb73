"""``agents/`` imports no Django: every module of it imports with Django absent."""

from __future__ import annotations

import subprocess
import sys

from tests.timing import WAIT_S

CODE = """
import importlib, pkgutil, sys
import agents
names = [m.name for m in pkgutil.walk_packages(agents.__path__, "agents.")]
for name in names:
    importlib.import_module(name)
assert len(names) > 10, names
leaked = sorted(m for m in sys.modules if m == "django" or m.startswith("django."))
assert not leaked, leaked
"""


def test_every_module_of_agents_imports_without_django():
    # A fresh interpreter: this test process has Django loaded by pytest-django.
    done = subprocess.run(
        [sys.executable, "-c", CODE], capture_output=True, text=True, timeout=WAIT_S
    )
    assert done.returncode == 0, done.stderr
