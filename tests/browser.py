"""Headless Chromium for tests that drive the Django admin like a person.

It is Debian's Chromium through Debian's ChromeDriver (`.ci/run` installs
both): naming both paths keeps Selenium Manager from ever downloading a
browser or a driver. Request the `browser` fixture; it takes a screenshot of
every page it lands on, numbered, under tests/output/<test function>/."""

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
OUTPUT_DIR = Path(__file__).resolve().parent / "output"
PAGE_LOAD_TIMEOUT = 30.0


def require_chromium() -> None:
    """Skip when Debian's Chromium or ChromeDriver is missing, on a developer's
    machine; in CI that is a broken setup, and a skip would hide it."""
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not os.access(path, os.X_OK)]
    if not missing:
        return
    reason = f"{', '.join(missing)} not installed (apt-get install chromium chromium-driver)"
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the browser test: {reason}")
    pytest.skip(reason)


class Browser:
    """A Chrome WebDriver on the live server, with a screenshot of each page."""

    def __init__(self, driver: webdriver.Chrome, base_url: str, output: Path) -> None:
        self.driver = driver
        self.base_url = base_url
        self.output = output
        self.pages = 0

    def screenshot(self, page: str) -> None:
        self.pages += 1
        self.driver.save_screenshot(str(self.output / f"{self.pages:02d}-{page}.png"))

    def visit(self, path: str, page: str) -> None:
        """Open a path of the live server (get() returns once it has loaded)."""
        self.driver.get(self.base_url + path)
        self.screenshot(page)

    def click_through(self, element: WebElement, page: str) -> None:
        """Click a link or a submit button and wait for the page it leads to."""
        current = self.driver.find_element(By.TAG_NAME, "html")
        element.click()
        WebDriverWait(self.driver, PAGE_LOAD_TIMEOUT).until(
            expected_conditions.staleness_of(current)
        )
        WebDriverWait(self.driver, PAGE_LOAD_TIMEOUT).until(
            lambda driver: driver.execute_script("return document.readyState") == "complete"
        )
        self.screenshot(page)

    def submit(self, page: str) -> None:
        """Submit the page's form: an admin form by its Save button, the login
        form by its only one."""
        buttons = self.find_all("input[type=submit][name=_save]") or self.find_all(
            "input[type=submit]"
        )
        assert len(buttons) == 1, f"{len(buttons)} submit buttons on {self.path}"
        self.click_through(buttons[0], page)

    def find(self, selector: str) -> WebElement:
        return self.driver.find_element(By.CSS_SELECTOR, selector)

    def find_all(self, selector: str) -> list[WebElement]:
        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def fill(self, field_id: str, value: str) -> None:
        field = self.driver.find_element(By.ID, field_id)
        field.clear()
        field.send_keys(value)

    def field(self, name: str) -> str:
        """The value shown for a field of a read-only change page."""
        return self.cell(self.find(f".field-{name} .readonly"))

    def changelist(self) -> list[dict[str, WebElement]]:
        """The rows of an admin changelist, each as {field name: cell}."""
        rows = []
        for row in self.find_all("#result_list tbody tr"):
            cells = row.find_elements(By.CSS_SELECTOR, "th, td")
            rows.append(
                {
                    name.removeprefix("field-"): cell
                    for cell in cells
                    for name in (cell.get_attribute("class") or "").split()
                    if name.startswith("field-")
                }
            )
        return rows

    @staticmethod
    def cell(element: WebElement) -> str:
        # All of its text, also where the table scrolls it out of sight.
        return str(element.get_attribute("textContent") or "").strip()

    @property
    def source(self) -> str:
        return str(self.driver.page_source)

    @property
    def path(self) -> str:
        url: str = self.driver.current_url
        return url.removeprefix(self.base_url)

    @property
    def text(self) -> str:
        """What a person reads on the page (not hidden markup)."""
        return str(self.driver.find_element(By.TAG_NAME, "body").text)


def chrome_options() -> webdriver.ChromeOptions:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        # Containers run as root, where Chromium's sandbox cannot start.
        "--no-sandbox",
        # /dev/shm is 64 MB in a container: too small for Chromium's renderers.
        "--disable-dev-shm-usage",
        "--window-size=1600,1200",
    ):
        options.add_argument(argument)
    return options


@pytest.fixture
def chromium(
    request: pytest.FixtureRequest, monkeypatch: Any
) -> Iterator[Callable[[str], Browser]]:
    """Opens headless Chromium on a server's base URL; its screenshots go
    under tests/output/<test function>/."""
    require_chromium()
    # Belt and braces: even if a path were dropped, nothing is downloaded.
    monkeypatch.setenv("SE_OFFLINE", "1")
    output = OUTPUT_DIR / request.node.originalname
    shutil.rmtree(output, ignore_errors=True)
    output.mkdir(parents=True)
    drivers: list[webdriver.Chrome] = []

    def open_on(base_url: str) -> Browser:
        driver = webdriver.Chrome(
            service=Service(executable_path=str(CHROMEDRIVER)), options=chrome_options()
        )
        drivers.append(driver)
        driver.set_page_load_timeout(PAGE_LOAD_TIMEOUT)
        return Browser(driver, base_url, output)

    try:
        yield open_on
    finally:
        for driver in drivers:
            driver.quit()


@pytest.fixture
def browser(chromium: Callable[[str], Browser], live_server: Any) -> Browser:
    """Headless Chromium on the live server."""
    return chromium(live_server.url)
