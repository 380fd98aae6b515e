"""The admin as an operator first sees it, at 1400 px: branded, apps in order, the capture viewer
linked, a provider with its channels and chain, an API key with its limits, and no page wider than
the window. Screenshots are kept in test-artifacts/ for a person to look at."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from tests.browser.chromium import ARTIFACTS
from tests.browser.test_admin_rules import login

pytestmark = pytest.mark.django_db(transaction=True)

PAGES = {
    "index": "/admin/",
    "providers": "/admin/providers/provider/",
    "provider": "/admin/providers/provider/{provider}/change/",
    "api-key": "/admin/keys/apikey/{key}/change/",
    "landing": "/",
}


def test_admin_pages_fit_1400px_and_lead_somewhere(page, live_server, admin_user):
    from io import StringIO

    from keys.models import ApiKey
    from providers.models import Provider

    call_command("loadconfig", "config/demo.yaml", stdout=StringIO())
    ids = {"provider": Provider.objects.get(name="demo-chat").pk, "key": ApiKey.objects.get(name="demo").pk}
    page.set_viewport_size({"width": 1400, "height": 900})
    login(page, live_server.url)
    for name, path in PAGES.items():
        page.goto(live_server.url + path.format(**ids))
        page.screenshot(path=str(ARTIFACTS / f"admin-{name}.png"), full_page=True)
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{name} is {overflow}px wider than the window"
    page.goto(live_server.url + "/admin/")
    assert "Monogate administration" in page.title() or "Monogate" in page.content()
    page.click("text=Capture viewer")
    page.wait_for_url("**/captures/**")
    assert not page.js_errors
