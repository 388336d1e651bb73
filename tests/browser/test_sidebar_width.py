"""The conversation list can be widened: a handle dragged with the mouse or moved with
the arrow keys, the width kept for the next page of this browser."""

from __future__ import annotations

import pytest

from tests.browser.test_accessibility import assert_accessible
from tests.browser.test_sidebar import new_page

pytestmark = pytest.mark.browser

WIDTH = "Math.round(document.getElementById('sidebar').getBoundingClientRect().width)"


def test_the_list_is_widened_by_dragging_its_handle_and_keeps_its_width(live_app, browser_page):
    page = browser_page
    page.goto(live_app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    assert page.evaluate(WIDTH) == 260
    handle = page.locator("#sidebar-resizer").bounding_box()
    x, y = handle["x"] + handle["width"] / 2, handle["y"] + 300

    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + 60, y, steps=4)
    page.mouse.move(x + 120, y, steps=4)
    page.mouse.up()

    widened = page.evaluate(WIDTH)
    assert 370 <= widened <= 390, widened
    assert page.get_attribute("#sidebar-resizer", "aria-valuenow") == str(widened)
    page.reload()
    page.wait_for_selector("#connection[data-state=open]")
    assert page.evaluate(WIDTH) == widened  # remembered in this browser

    page.mouse.move(x + 120, y)  # past the widest it may be: held at its limit
    page.mouse.down()
    page.mouse.move(x + 900, y, steps=4)
    page.mouse.up()
    assert page.evaluate(WIDTH) == 560


def test_the_handle_works_from_the_keyboard_and_passes_axe(live_app, browser_page):
    page = browser_page
    page.goto(live_app.url + "/")
    page.wait_for_selector("#connection[data-state=open]")
    page.focus("#sidebar-resizer")

    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    assert page.evaluate(WIDTH) == 292
    page.keyboard.press("ArrowLeft")
    assert page.evaluate(WIDTH) == 276
    page.keyboard.press("Home")
    assert page.evaluate(WIDTH) == 200
    assert page.get_attribute("#sidebar-resizer", "aria-valuenow") == "200"
    page.keyboard.press("Enter")  # back to its usual width
    assert page.evaluate(WIDTH) == 260
    ring = page.evaluate(
        "getComputedStyle(document.activeElement).outlineStyle !== 'none'"
    )  # fmt: skip
    assert ring and page.evaluate("document.activeElement.id") == "sidebar-resizer"
    assert_accessible(page, "the list's width handle")


def test_a_phone_has_no_handle_and_a_stored_width_leaves_its_drawer_alone(live_app, browser_page):
    page = new_page(browser_page, viewport={"width": 390, "height": 844})
    page.goto(live_app.url + "/")
    page.evaluate("localStorage.setItem('sidebar-width', '500')")
    page.reload()
    page.wait_for_selector("#connection[data-state=open]")
    assert not page.locator("#sidebar-resizer").is_visible()
    page.click("#sidebar-toggle")
    assert page.evaluate(WIDTH) <= 320  # the drawer's own width
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
