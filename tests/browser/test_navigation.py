"""The navigation: one menu per kind of work, opened by mouse or keyboard, per role."""

from __future__ import annotations

from playwright.sync_api import expect

# The first menu is the workspace's (issue 46): its name, with a hidden "Workspace:".
WORKSPACE = "Workspace:\nDefault"
RESEARCHER_MENUS = [WORKSPACE, "Data", "Studies", "Annotation", "Models", "Reports", "Admin"]


def menu_links(page) -> dict[str, list[str]]:
    nav = page.get_by_role("navigation", name="Main")
    menus = {}
    for group in nav.locator("details.navgroup").all():
        name = group.locator("summary").inner_text().strip()
        menus[name] = [a.get_attribute("href") for a in group.locator("a").all()]
    return menus


def test_researcher_reaches_every_menu_page(page, live_server, researcher, log_in_as, screenshot):
    log_in_as(page)
    menus = menu_links(page)
    assert list(menus) == RESEARCHER_MENUS
    for group, hrefs in menus.items():
        assert hrefs, group  # the workspace menu: Members, New workspace
        for href in hrefs:
            response = page.request.get(f"{live_server.url}{href}")
            assert response.status == 200, (group, href, response.status)

    nav = page.get_by_role("navigation", name="Main")
    nav.locator("summary", has_text="Models").click()
    expect(nav.get_by_role("link", name="Backends")).to_be_visible()
    screenshot("nav-models-open")
    # One menu open at a time.
    nav.locator("summary", has_text="Reports").click()
    expect(nav.get_by_role("link", name="Backends")).to_be_hidden()
    expect(nav.get_by_role("link", name="Validation agreement")).to_be_visible()
    page.keyboard.press("Escape")
    expect(nav.get_by_role("link", name="Validation agreement")).to_be_hidden()

    # Keyboard: focus the menu, open it with Enter, follow a link with Enter.
    nav.locator("summary", has_text="Studies").focus()
    page.keyboard.press("Enter")
    nav.get_by_role("link", name="All studies").focus()
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server.url}/studies/")
    expect(nav.locator("details.navgroup.current summary")).to_have_text("Studies")


def test_annotator_sees_only_annotation(page, live_server, annotator, log_in_as):
    log_in_as(page, annotator.username, "pw-ann-123!")
    menus = menu_links(page)
    assert list(menus) == [WORKSPACE, "Annotation"]
    assert menus[WORKSPACE] == []  # one workspace, and no member pages for an annotator
    assert len(menus["Annotation"]) == 2
    for href in menus["Annotation"]:
        assert page.request.get(f"{live_server.url}{href}").status == 200


def test_rater_has_no_menus(page, live_server, rater, log_in_as):
    log_in_as(page, rater.username, "pw-rat-123!")
    assert menu_links(page) == {}
    expect(page.get_by_role("button", name="Log out")).to_be_visible()


def test_menus_fit_a_phone(browser, live_server, researcher, log_in_as, screenshot_of):
    context = browser.new_context(viewport={"width": 390, "height": 844})
    phone = context.new_page()
    try:
        log_in_as(phone)
        nav = phone.get_by_role("navigation", name="Main")
        for group in RESEARCHER_MENUS:
            nav.locator("summary", has_text=group).click()
            menu = nav.locator("details.navgroup[open] > ul")
            box = menu.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, (
                group,
                box,
            )
            if group == "Models":
                screenshot_of(phone, "nav-phone-models")
    finally:
        context.close()
