"""The browser tests' own fixture: a Chromium that dies fails one test, not its module's
rest (a module's tests share one Chromium, tests/browser/conftest.py)."""

from __future__ import annotations

import contextlib

import pytest
from playwright.sync_api import Error

from tests.timing import wait_until

pytestmark = pytest.mark.browser


def test_a_chromium_that_crashes_in_a_test(browser_page):
    browser = browser_page.context.browser
    session = browser.new_browser_cdp_session()
    with contextlib.suppress(Error):  # the answer may never come: the browser is gone
        session.send("Browser.crash")  # the process dies, as under the OOM killer
    wait_until(lambda: not browser.is_connected(), "Chromium to be gone")


def test_the_next_test_of_the_module_gets_a_working_page(browser_page):
    browser_page.set_content("<p id=ok>still here</p>")

    assert browser_page.inner_text("#ok") == "still here"
