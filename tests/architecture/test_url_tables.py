"""common.urls: the URL tables' two shapes build the paths a hand-written list would."""

from django.urls import resolve, reverse

from common.urls import screen_and_submit, under


def view_a(request, **kwargs):
    return None


def view_b(request, **kwargs):
    return None


def test_under_prefixes_each_row_and_keeps_names_and_kwargs():
    patterns = under(
        "<int:study_id>/",
        [
            ("", view_a, "detail"),
            ("x.csv", view_b, "export", {"fmt": "csv"}),
            screen_and_submit("tasks/<int:task_id>/", view_a, view_b, "task"),
        ],
    )
    assert [(str(p.pattern), p.name) for p in patterns] == [
        ("<int:study_id>/", "detail"),
        ("<int:study_id>/x.csv", "export"),
        ("<int:study_id>/tasks/<int:task_id>/", "task"),
        ("<int:study_id>/tasks/<int:task_id>/submit/", "task-submit"),
    ]
    assert patterns[1].default_args == {"fmt": "csv"}
    assert patterns[0].default_args == {}
    assert patterns[3].callback is view_b


def test_a_submit_route_resolves_to_its_submit_view():
    # A real table: the CharToM-QA bonus screen and its submit.
    url = reverse("annotation:chartom-bonus-submit", args=[7])
    assert url == "/annotation/chartom/bonus/7/submit/"
    match = resolve(url)
    assert match.func.__name__ == "bonus_submit"
    assert match.kwargs == {"assignment_id": 7}
