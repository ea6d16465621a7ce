"""Walk every URL pattern with malformed path, query and form values: never a 5xx.

Issue 10, item 5 found 500s from odd input (Unicode digits, a 5,000-digit number, a
NUL byte). This test takes every pattern from ``get_resolver()`` (recursively, the
admin and the API included), fills its path parameters with real ids of a small
live study, then sends GET and POST requests as an anonymous visitor, a rater and a
researcher:

- with every common query/form key set to each malformed value;
- with each path parameter in turn replaced by each malformed value (where the URL
  still resolves: a value the converter refuses is the resolver's 404, no view runs);
- for POSTs, answer fields whose names carry a 5,000-digit id.

CSRF checks are off (the test client's default), so POSTs reach the views. Any status
>= 500 is collected with its method, user and URL, and all of them are reported.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import quote

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, resolve
from django.urls.exceptions import Resolver404
from django.urls.resolvers import RegexPattern, RoutePattern

from modeling.models import PromptTemplate, Run
from studies.participation import services as participation_services
from studies.scene import services as scene_services
from tests.studies.conftest import friends, live_study  # noqa: F401 - fixtures used below

pytestmark = pytest.mark.django_db

HUGE = "9" * 5000
MALFORMED = ["²", HUGE, "1" + "0" * 30, "a\x00b", "-1", "x" * 5000]
# Django's own admin pages are the slowest to render: the values that broke them.
MALFORMED_ADMIN = ["²", HUGE, "a\x00b"]
QUERY_KEYS = [
    "page",
    "assignment",
    "runs",
    "studies",
    "seed",
    "q",
    "o",
    "p",
    "e",
    "limit",
    "offset",
    "ordering",
    "search",
    "format",
    "study",
    "work",
    "benchmark",
    "split",
    "kind",
    "status",
    "next",
    "all",
]
FORM_KEYS = [
    *QUERY_KEYS,
    "held_back",
    "seen",
    "count",
    "labels",
    "name",
    "instructions",
    "consent",
    "username",
    "password",
    "history_needed",
    "history_needed-sent",
    "scenes",
    "per_stratum",
    "overlap",
    "min_seen",
    "min_unseen",
    "reveal",
    "tags",
    "works",
    "budget_tokens",
    "template",
    "backend",
    "method",
    "items",
]
_ROUTE_PARAM = re.compile(r"<(?:(?P<converter>[^>:]+):)?(?P<name>[^>]+)>")
_REGEX_GROUP = re.compile(r"\(\?P<(?P<name>\w+)>(?P<regex>(?:[^()]|\([^()]*\))*)\)")


@dataclass(frozen=True)
class Route:
    """One URL pattern, its full route text (prefixes included) and its parameters."""

    text: str
    pattern: URLPattern
    regexes: dict[str, str]  # parameter -> the regex its value must match

    @property
    def is_admin(self) -> bool:
        return self.text.startswith("admin/")


def _routes(patterns, prefix: str = "", regexes: dict[str, str] | None = None) -> Iterator[Route]:
    regexes = dict(regexes or {})
    for entry in patterns:
        text = prefix + str(entry.pattern)
        found = dict(regexes)
        if isinstance(entry.pattern, RoutePattern):
            for name, converter in entry.pattern.converters.items():
                found[name] = converter.regex
        elif isinstance(entry.pattern, RegexPattern):
            for m in _REGEX_GROUP.finditer(str(entry.pattern)):
                found[m["name"]] = m["regex"]
        if isinstance(entry, URLResolver):
            yield from _routes(entry.url_patterns, text, found)
        else:
            yield Route(text=text, pattern=entry, regexes=found)


def _fill(route: Route, values: dict[str, str]) -> str:
    """The route with each parameter replaced by ``values[name]`` (URL-quoted)."""
    # Regex groups first: "(?P<name>…)" would otherwise look like a route's "<name>".
    text = _REGEX_GROUP.sub(lambda m: quote(values[m["name"]], safe=""), route.text)
    text = _ROUTE_PARAM.sub(lambda m: quote(values[m["name"]], safe=""), text)
    text = text.replace("^", "").replace("$", "").replace("/?", "/").replace("\\.", ".")
    return "/" + text


def _valid_value(name: str, regex: str, ids: dict[str, str]) -> str:
    candidates = [ids.get(name, ""), *ids.get("*", "").split()]
    if alternatives := re.fullmatch(r"\(?([\w|-]+)\)?", regex):
        candidates.insert(1, alternatives[1].split("|")[0])
    for candidate in candidates:
        if candidate and re.fullmatch(regex, candidate):
            return candidate
    return "1"


@pytest.fixture
def world(live_study, researcher, rater):  # noqa: F811
    """Real rows for every kind of id in the paths: a rater midway through a scene."""
    (participant,) = participation_services.participants_invite(study=live_study, labels=["walker"])
    participant = participation_services.participant_consent(participant=participant)
    study_work = live_study.study_works.get()
    session = scene_services.familiarity_declare(
        participant=participant, study_work=study_work, seen=False
    )
    scene_services.history_confirm(participant=participant, session=session)
    assignment = session.assignments.order_by("position").first()
    instance = assignment.study_item.scene.instances.order_by("code").first()
    run = Run.objects.create(name="walk", benchmark="dyntom", method="vanilla", model="m")
    template = PromptTemplate.objects.order_by("pk").first()
    ids = {
        "study_id": str(live_study.pk),
        "participant_id": str(participant.pk),
        "scene_id": str(assignment.study_item_id),
        "study_work_id": str(study_work.pk),
        "token": participant.token,
        "session_id": str(session.pk),
        "assignment_id": str(assignment.pk),
        "run_id": str(run.pk),
        "template_id": str(template.pk if template else 1),
        "benchmark": "tvshowguess",
        "key": "accuracy",
        "format": "json",
        "object_id": str(live_study.pk),
        "pk": str(run.pk),
        "*": "csv svg json .json",
    }
    return {"ids": ids, "instance": instance.pk, "researcher": researcher, "rater": rater}


def _clients(world) -> dict[str, Client]:
    clients = {}
    for label in ("anonymous", "rater", "researcher"):
        client = Client(raise_request_exception=False)
        if label != "anonymous":
            client.force_login(world[label])
        clients[label] = client
    return clients


def _resolves(url: str, route: Route) -> bool:
    try:
        match = resolve(url.split("?")[0])
    except Resolver404:
        return False
    # The route text too: a view wrapped after the patterns were built (a throttle)
    # is no longer the pattern's callback object.
    return match.func == route.pattern.callback or match.route == route.text


# The walk is split into shards (every SHARDS-th pattern each) so that pytest-xdist
# spreads its ~70 s over the workers instead of leaving one worker with all of it;
# together the shards walk every pattern, as one test did.
SHARDS = 8


def _shard(routes: list[Route], shard: int) -> list[Route]:
    """Every SHARDS-th pattern from ``shard``, in the resolver's order."""
    return routes[shard::SHARDS]


def test_the_shards_walk_every_pattern_once():
    routes = list(_routes(get_resolver().url_patterns))
    assert len(routes) > 100  # the admin, the API and our pages are all in the walk
    walked = [route.text for shard in range(SHARDS) for route in _shard(routes, shard)]
    assert sorted(walked) == sorted(route.text for route in routes)


@pytest.mark.parametrize("shard", range(SHARDS))
def test_no_url_answers_malformed_input_with_a_server_error(world, shard):
    routes = _shard(list(_routes(get_resolver().url_patterns)), shard)
    assert len(routes) > 100 // SHARDS
    ids = world["ids"]
    instance = world["instance"]
    answer_fields = {f"choice-{instance}": None, f"evidence-{instance}": None}
    bad_field_names = {f"choice-{HUGE}": "0", f"evidence-{HUGE}": "x", f"tags-{HUGE}-sent": "1"}
    failures: list[str] = []
    requests = 0
    unresolved = []

    def check(client: Client, who: str, method: str, url: str, data=None) -> None:
        nonlocal requests
        requests += 1
        call = client.get if method == "GET" else client.post
        response = call(url, data=data or {})
        if response.status_code >= 500:
            exc = (getattr(response, "exc_info", None) or (None, None))[1]
            where = ""
            if exc is not None and exc.__traceback__ is not None:
                frame = traceback.extract_tb(exc.__traceback__)[-1]
                where = f" at {frame.filename.split('/work/main/')[-1]}:{frame.lineno}"
            failures.append(
                f"{response.status_code} {method} {url[:100]!r} as {who}: "
                f"{type(exc).__name__}: {str(exc)[:150]}{where}"
            )

    # Logging out is walked last, so the other requests keep their sessions.
    routes.sort(key=lambda r: r.pattern.name == "logout")
    for route in routes:
        valid = {n: _valid_value(n, rx, ids) for n, rx in route.regexes.items()}
        url = _fill(route, valid)
        if not _resolves(url, route):
            unresolved.append(route.text)
            continue
        clients = _clients(world)
        # Django's admin sends anyone who is not staff to its login page before any
        # view code runs: one request each for them, the full walk for the researcher.
        users = ["researcher"] if route.is_admin else list(clients)
        for who in ("anonymous", "rater") if route.is_admin else ():
            check(clients[who], who, "GET", url)
        for who in users:
            client = clients[who]
            for value in MALFORMED_ADMIN if route.is_admin else MALFORMED:
                query = "&".join(f"{k}={quote(value, safe='')}" for k in QUERY_KEYS)
                check(client, who, "GET", f"{url}?{query}")
                form = dict.fromkeys(FORM_KEYS, value) | dict.fromkeys(answer_fields, value)
                check(client, who, "POST", url, form)
                for name in route.regexes:
                    if route.is_admin and value == "²":
                        continue  # the admin's ids are strings: NUL and HUGE cover them
                    bad = _fill(route, valid | {name: value})
                    if _resolves(bad, route):
                        check(client, who, "GET", bad)
                        check(client, who, "POST", bad)
            if not route.is_admin:  # answer fields: our forms only
                check(client, who, "POST", url, bad_field_names)

    print(f"{len(routes)} patterns, {requests} requests")  # shown with pytest -s
    assert not unresolved, f"patterns the walk could not fill: {unresolved}"
    assert requests > 2000 // SHARDS
    assert not failures, f"{len(failures)} server errors:\n" + "\n".join(failures)
