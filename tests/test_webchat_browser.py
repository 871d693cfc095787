"""An end user at the official webchat, in headless Chromium, every part real:
uvicorn serving the page and the chat interface, a Celery worker delivering
events, and examples/echo_bot.py as the bot. The user opens the page, sends
a message and sees the bot's reply, gives it a thumbs up, sends a file, and
after a reload finds the conversation again. Screenshots of each step land
under tests/output/test_an_end_user_talks_to_the_bot_in_the_webchat/."""

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from bots.models import Message
from chat.models import MessageFeedback
from files.models import File, FileStatus
from tests.browser import Browser, chromium  # noqa: F401
from tests.factories import ChatConnectionFactory
from tests.servers import READ_TIMEOUT, celery_queue, servers  # noqa: F401
from tests.test_chat_round_trip import echo_bot  # noqa: F401
from tests.worker import wait_until, workers  # noqa: F401

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

WAIT = 30.0
# The smallest PNG there is: a 1x1 transparent pixel.
PIXEL = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)


def shows(window: Browser, text: str) -> None:
    WebDriverWait(window.driver, WAIT).until(lambda _: text in window.text)


def test_an_end_user_talks_to_the_bot_in_the_webchat(
    bot,
    echo_bot,  # noqa: F811
    workers,  # noqa: F811
    chromium: Callable[[str], Browser],  # noqa: F811
    tmp_path: Path,
):
    _, web = echo_bot
    workers.start(beat=False)
    webhook_id = ChatConnectionFactory(bot=bot).webhook_id
    window = chromium(web.url)

    window.visit(f"/chat/{webhook_id}/webchat", "opened")
    composer = WebDriverWait(window.driver, WAIT).until(
        lambda driver: driver.find_element(By.CSS_SELECTOR, "textarea.bpComposerInput")
    )
    composer.send_keys("Hello from Chromium\n")
    shows(window, "You said: Hello from Chromium")
    window.screenshot("answered")

    # A thumbs up on the bot's reply: stored for the user, told to the bot.
    reply = Message.objects.get(bot=bot, is_bot=True)
    window.find(".bpMessageBlocksBubbleFeedbackIcon.lucide-thumbs-up").click()
    feedback: Any = wait_until(
        lambda: MessageFeedback.objects.filter(message=reply).first(),
        timeout=WAIT,
        message="the thumbs up to be stored",
    )
    assert feedback.value == "positive"
    assert feedback.user.chat_id != f"bot:{bot.id}"
    window.screenshot("feedback")

    # A file, through the composer's file input: uploaded, the bot's.
    picture = tmp_path / "pixel.png"
    picture.write_bytes(PIXEL)
    window.find("input[type=file]").send_keys(str(picture))
    uploaded: Any = wait_until(
        lambda: File.objects.filter(bot=bot, status=FileStatus.UPLOAD_COMPLETED).first(),
        timeout=WAIT,
        message="the picture to be uploaded",
    )
    assert uploaded.key.endswith("pixel.png") and uploaded.size == len(PIXEL)
    # Sent: a message whose payload points at the file's public url.
    window.find(".bpComposerSendButton").click()
    sent: Any = wait_until(
        lambda: Message.objects.filter(bot=bot, is_bot=False).exclude(type="text").first(),
        timeout=WAIT,
        message="the message carrying the picture",
    )
    assert sent.type in ("image", "file"), sent.payload
    assert "/v1/downloads/" in str(sent.payload), sent.payload
    window.screenshot("file")

    # A reload finds the same conversation, its messages and the verdict.
    window.driver.refresh()
    shows(window, "You said: Hello from Chromium")
    assert "Hello from Chromium" in window.text
    selected = window.find_all(".lucide-thumbs-up[data-selected=true]")
    assert selected, "the thumbs up given before the reload"
    window.screenshot("reloaded")
    assert Message.objects.filter(bot=bot, is_bot=False).count() >= 1
