"""CPU of a new visitor's page load: ``GET /``, the cookie check's redirect, the page.

Run from the repository root::

    .venv/bin/python bench/page.py [--loads 200] [--tiny]

In one process, on a scratch SQLite database (migrated here), with Django's test client
(one client reused, its cookies cleared before each load so every load is a new
visitor, as each of bench/load.py's browsers is): prints the SQL statements of one load,
the templates it renders, the CPU time (``time.process_time``) per load, and the load
average. Exits 1 if a load does not end on the conversation page (200).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", type=int, default=200, help="page loads timed")
    parser.add_argument("--tiny", action="store_true", help="5 loads (CI)")
    args = parser.parse_args()
    loads = 5 if args.tiny else args.loads
    sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["DATABASE_URL"] = f"sqlite:///{tmp}/page.sqlite3"
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connection
        from django.template.backends.django import Template
        from django.test import Client
        from django.test.utils import CaptureQueriesContext

        call_command("migrate", verbosity=0)
        renders: dict[str, int] = {}
        original = Template.render

        def counted(self, context=None, request=None):  # type: ignore[no-untyped-def]
            renders[self.origin.template_name] = renders.get(self.origin.template_name, 0) + 1
            return original(self, context, request)

        Template.render = counted  # type: ignore[method-assign]
        client = Client()

        def load() -> int:
            client.cookies.clear()
            first = client.get("/")
            second = client.get(first["Location"])
            return client.get(second["Location"]).status_code

        if load() != 200:  # warm: templates compiled, URLs resolved
            print("the page load did not end on the conversation page")
            return 1
        renders.clear()
        with CaptureQueriesContext(connection) as queries:
            load()
        # Read now: captured_queries slices the connection's log, which the next request
        # clears (Django's reset_queries at each request start), so it read 0 at the end.
        statements = [query["sql"] for query in queries.captured_queries]
        per_load = dict(renders)
        began = time.process_time()
        statuses = [load() for _ in range(loads)]
        cpu_ms = (time.process_time() - began) / loads * 1000
    print(f"SQL statements per load {len(statements)}")
    for sql in statements:
        print(f"  {sql[:100]}")
    print(f"templates per load {per_load}")
    print(f"CPU per page load (3 requests) {cpu_ms:.2f} ms over {loads} loads")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0 if all(status == 200 for status in statuses) else 1


if __name__ == "__main__":
    raise SystemExit(main())
