"""A held call's card on a phone: whole, its buttons proper targets, Approve first."""

from __future__ import annotations

import pytest

from tests.browser.conftest import ARTIFACTS
from tests.browser.test_accessibility import assert_accessible
from tests.browser.test_approvals import HELD, POLICY, ask_and_wait
from tests.browser.test_sidebar import new_page

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_approval_card_fits_a_phone_with_proper_targets(start_app, browser_page, scheme):
    app = start_app(env=POLICY)
    page = new_page(browser_page, viewport={"width": 390, "height": 844}, color_scheme=scheme,
                    is_mobile=True, has_touch=True)  # fmt: skip
    ask_and_wait(app, page)
    form = page.locator(f"{HELD} [data-approval-form]")
    form.scroll_into_view_if_needed()

    boxes = {name: page.locator(f"{HELD} button.{name}").bounding_box()
             for name in ("approve", "deny")}  # fmt: skip
    for box in boxes.values():
        assert box["height"] >= 32 and box["width"] >= 44
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390
    assert boxes["approve"]["y"] < boxes["deny"]["y"]  # Approve first, as in the focus order
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    expiry = form.locator("time[data-until]")
    assert expiry.inner_text().startswith("in ")
    form.screenshot(path=str(ARTIFACTS / f"browser-approval-phone-{scheme}.png"))
    assert_accessible(page, f"a held call's card on a phone ({scheme})")
