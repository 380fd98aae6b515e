"""The ``page`` fixture shared by the browser tests (Playwright driving Debian's Chromium)."""

from __future__ import annotations

import os

import pytest

from tests.browser.chromium import ARGS, ARTIFACTS, CHROMIUM


@pytest.fixture
def page(live_server, monkeypatch):
    """A fresh page; uncaught page errors collect in ``page.js_errors``."""
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):  # make test installs it as root (tools/system-deps.sh)
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")

    # Playwright's sync API runs an event loop in this thread; the test's own ORM calls are
    # still synchronous, so Django's async-unsafe guard is lifted for these tests only.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        # the admin's CSP forbids eval, which Playwright's wait_for_function uses; the CSP itself is
        # tested in tests/foundation (security headers)
        context = browser.new_context(viewport={"width": 1440, "height": 1000}, bypass_csp=True)
        page = context.new_page()
        page.set_default_timeout(15000)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.js_errors = errors
        yield page
        context.close()
        browser.close()
