"""Remake docs/screenshot.png, the chat page the README shows.

Starts the app (Daphne, exactly as ``make run`` serves it) on a scratch SQLite database
and a free port, asks the travel question with the offline demo model in headless
Chromium, waits for the run to end and saves the page. Needs the dev requirements
(Playwright) and Debian's chromium: ``make screenshot`` installs both.

    .venv/bin/python scripts/screenshot.py [--output docs/screenshot.png] [--dark]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts.serving import daphne  # noqa: E402

QUESTION = "Plan 3 days in Hangzhou: sights to visit, the weather, and a B&B room."
# Small enough for a README (about 100 KB as PNG), wide enough for the sidebar and a card.
VIEWPORT = {"width": 1200, "height": 900}
WAIT_S = 60


def take(url: str, output: Path, *, dark: bool) -> None:
    """Ask :data:`QUESTION` at ``url`` and save the page once its run has ended."""
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("Chromium is not installed: run scripts/ensure-chromium.sh")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium, args=["--headless", "--no-sandbox", "--disable-gpu"]
        )
        context = browser.new_context(viewport=VIEWPORT, color_scheme="dark" if dark else "light")
        context.set_default_timeout(WAIT_S * 1000)
        page = context.new_page()
        page.goto(url + "/")
        page.wait_for_selector("#connection[data-state=open]")
        page.fill("#composer-input", QUESTION)
        page.press("#composer-input", "Enter")
        page.wait_for_selector(".run-status:not([data-status=running])")
        status = page.locator(".run-status").first.get_attribute("data-status")
        if status != "succeeded":
            raise SystemExit(f"the run ended {status}: not a picture for the README")
        # The run's timeline open: three parallel calls, the booking search the slow one.
        page.locator(".run .timeline > summary").first.click()
        output.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(output), animations="disabled")
        browser.close()


def main() -> None:
    """Parse the arguments, serve the app on a scratch database, take the picture."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=ROOT / "docs" / "screenshot.png")
    parser.add_argument("--dark", action="store_true", help="the dark colour scheme")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        env = {
            **os.environ,
            "DATABASE_URL": f"sqlite:///{scratch}/screenshot.sqlite3",
            "DJANGO_SETTINGS_MODULE": "project.settings",
            "DEMO_TOKEN_DELAY_MS": "2",
            "DEMO_TOOL_DELAY_MS": "300",
        }
        env.pop("OPENAI_API_KEY", None)  # the offline demo model, whatever the shell has
        env.pop("AGENT_MODELS_FILE", None)
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
                       cwd=ROOT, env=env, check=True)  # fmt: skip
        with daphne(env, timeout_s=WAIT_S) as (_, port):
            take(f"http://127.0.0.1:{port}", args.output, dark=args.dark)
    size_kb = args.output.stat().st_size / 1024
    print(f"Saved {args.output} ({size_kb:.0f} KB)")


if __name__ == "__main__":
    main()
