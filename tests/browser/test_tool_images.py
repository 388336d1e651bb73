"""An image a tool returned, in headless Chromium: the chat's card and the admin's run page
draw it (a decoded picture, not text), a remote image stays a link, the artifact folds."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import ARTIFACTS, create_superuser, on_database, sign_in_to_admin

pytestmark = pytest.mark.browser

# Stores a run in the guest's conversation (argv[1]) whose one tool call returned text, a
# PNG, a remote image and an artifact, as the recorder stores them; prints the run's id.
SEED = """
import sys
import django
django.setup()
from django.utils import timezone
from agents.events import RunStatus, StepStatus
from agents.tool_output import content_text
from chat import store
from chat.models import StepKind
from tests.images import png_base64
blocks = [{"type": "text", "text": "Rainfall in Suzhou:"},
          {"type": "image", "base64": png_base64(64, 40), "mime_type": "image/png"},
          {"type": "image", "url": "https://tracker.example/pixel.png"}]
text, kept = content_text(blocks)
now = timezone.now()
run = store.run_start(conversation_id=int(sys.argv[1]), content="Rain in Suzhou?",
                      provider="demo", model_name="demo-scripted", started_at=now)
call = store.step_start(run_id=run.pk, kind=StepKind.TOOL_CALL, iteration=1, started_at=now,
                        tool_name="rain_chart", tool_call_id="call_1", arguments={"town": "Suzhou"})
store.step_finish(step_id=call.pk, finished_at=now, status=StepStatus.SUCCESS, result=text,
                  result_blocks=list(kept), artifact={"months": ["Jun", "Jul"]})
store.run_finish(run_id=run.pk, status=RunStatus.SUCCEEDED, output="Wet summers.", error="",
                 iterations=1, usage={}, finished_at=timezone.now())
print(run.pk)
"""

DRAWN = "img => img.complete && img.naturalWidth > 0"


def test_an_image_a_tool_returned_is_drawn_in_the_card_and_on_the_admins_run_page(
    live_app, browser_page, capfd
):
    page = browser_page
    page.goto(live_app.url + "/")
    conversation_id = int(re.search(r"/c/(\d+)/", page.url).group(1))
    capfd.readouterr()
    on_database(live_app.database, "-c", SEED, str(conversation_id))
    run_id = int(capfd.readouterr().out.split()[-1])
    page.reload()
    page.wait_for_selector("#connection[data-state=open]")

    card = page.locator(".tool-card[data-tool=rain_chart]")
    card.locator("> summary").click()
    image = card.locator("img[data-tool-image]")
    image.wait_for()
    page.wait_for_function(f"() => ({DRAWN})(document.querySelector('img[data-tool-image]'))")
    assert image.evaluate("img => [img.naturalWidth, img.naturalHeight]") == [64, 40]
    assert image.bounding_box()["width"] > 0
    link = card.locator(".result-media a")
    assert link.get_attribute("href") == "https://tracker.example/pixel.png"
    assert card.locator("img").count() == 1  # the remote one is never loaded
    assert "[image: image/png, " in card.locator("pre.result").inner_text()
    artifact = card.locator("details.artifact")
    assert not artifact.evaluate("d => d.open")
    artifact.locator("summary").click()
    assert '"months"' in artifact.locator("pre").inner_text()
    page.screenshot(path=str(ARTIFACTS / "browser-tool-image.png"), full_page=True)

    create_superuser(live_app.database, "root", "image-pw")
    sign_in_to_admin(page, live_app.url, f"/admin/chat/agentrun/{run_id}/change/", "image-pw")
    admin_image = page.locator(".trace-step img[data-tool-image]")
    admin_image.wait_for()
    page.wait_for_function(f"() => ({DRAWN})(document.querySelector('.trace-step img'))")
    assert admin_image.evaluate("img => img.naturalWidth") == 64
