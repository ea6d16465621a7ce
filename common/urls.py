"""URL tables: the shapes our page families repeat, written once.

A family of pages shares a prefix (``"<int:study_id>/"``), and every task screen of
the annotation workflows has a POST beside it that submits it. ``under`` and
``screen_and_submit`` build those ``path()`` lists, so a urls module reads as a table
of (route, view, name) rows, and the naming rule of a screen and its submit lives here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.urls import URLPattern, path

View = Callable[..., Any]
Route = tuple[str, View, str] | tuple[str, View, str, dict[str, Any]]


def under(prefix: str, routes: Iterable[Route | list[Route]]) -> list[URLPattern]:
    """``path(prefix + route, view, kwargs, name=name)`` for each row of the table.

    A row may be a list of rows (``screen_and_submit``'s pair).
    """
    patterns: list[URLPattern] = []
    for row in routes:
        for route, view, name, *extra in row if isinstance(row, list) else [row]:
            patterns.append(path(prefix + route, view, extra[0] if extra else None, name=name))
    return patterns


def screen_and_submit(route: str, screen: View, submit: View, name: str) -> list[Route]:
    """A task screen at ``route`` named ``name``, and the POST that submits it at
    ``route + "submit/"`` named ``name + "-submit"``."""
    return [(route, screen, name), (f"{route}submit/", submit, f"{name}-submit")]
