"""The helper that blanks a page's tokens before a name is looked for."""

from tests.page_text import without_tokens


def test_only_the_tokens_places_are_blanked():
    page = (
        '<body hx-headers=\'{"X-CSRFToken": "xxBobxx"}\'><a href="/s/aBobz-1/">go</a>'
        '<input type="hidden" name="csrfmiddlewaretoken" value="qBobq"><p>gold-Bob</p>'
    )
    assert without_tokens(page).count("Bob") == 1  # the paragraph's, not the tokens'
