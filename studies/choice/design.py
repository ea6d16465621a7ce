"""The CharToM-QA human-study design (paper 6.3), as pure Python.

Every sampled question goes to one participant who has read its book and one who has
not, and each participant gets as many questions about books they have read as about
books they have not (the paper: 8 participants, 150 questions from 5 books, 600 picks
with the two plot windows).

How: the design is one min-cost circulation on a small graph. A unit of flow leaves a
book as a reader slot, passes through a participant and enters another book as a
not-read slot; a book passes the unit on (book in -> book out) once per question it
covers. Conservation is the whole design: at a participant it says read = not-read,
at a book it says reader slots = non-reader slots = covered questions, so a question is
either covered by a pair or left out, never half.

Slots already started (``fixed``) are kept as they are, so a late joiner or a withdrawal
rebalances only what nobody has started. A question whose reader (or non-reader) has
started only needs its partner: it enters (or leaves) the graph at a hub, as does the
difference of a participant who started more read than not-read questions (or the
reverse), who is owed that many unpaired slots of the other kind. Whoever cannot be
made even that way is named in ``Design.unbalanced``.

The costs are lexicographic: first even out those started differences, then cover as
many questions as possible, then keep loads even (the sum of squared loads, so no pair
of slots can move from one participant to another more than two slots lighter). Only
then are the counts turned into concrete questions.
"""

from __future__ import annotations

import heapq
import random
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

Question = Hashable
Book = Hashable
Person = Hashable


@dataclass(frozen=True)
class Slot:
    """One participant answering one question, as a reader of its book or not."""

    question: Question
    participant: Person
    read: bool


@dataclass
class Design:
    """The slots to hand out, and what could not be covered (with the reason)."""

    slots: list[Slot] = field(default_factory=list)
    uncovered: list[tuple[Question, str]] = field(default_factory=list)
    # Participants who get nothing, with the reason (read every book or none, or none of
    # their books has a question they can take without unbalancing someone).
    excluded: dict[Person, str] = field(default_factory=dict)
    # Participants who get questions but read != not-read (their started slots cannot
    # be evened out), with the reason.
    unbalanced: dict[Person, str] = field(default_factory=dict)

    def counts(self, fixed: Iterable[Slot] = ()) -> dict[Person, tuple[int, int]]:
        """(read, not read) per participant, counting ``fixed`` slots too."""
        out: dict[Person, list[int]] = defaultdict(lambda: [0, 0])
        for slot in [*fixed, *self.slots]:
            out[slot.participant][0 if slot.read else 1] += 1
        return {p: (r, n) for p, (r, n) in out.items()}


class _MinCostFlow:
    """Successive shortest paths (Dijkstra with potentials) on integer node ids.

    Arcs come in pairs (forward ``e`` even, reverse ``e ^ 1``); the flow on an arc is
    its reverse's residual capacity. A *convex* arc has unbounded capacity and a cost
    that grows with its flow, so each unit through it is priced on its own (the design
    uses it for a participant's load).
    """

    def __init__(self, nodes: int) -> None:
        self.adj: list[list[int]] = [[] for _ in range(nodes)]
        self.to: list[int] = []
        self.cap: list[int] = []
        self.cost: list[int] = []
        self.convex: dict[int, int] = {}  # forward arc -> the load it starts from

    def add(self, u: int, v: int, cap: int, cost: int = 0, *, saturated: bool = False) -> int:
        """An arc ``u -> v``; ``saturated`` starts it full (its flow can only be undone)."""
        e = len(self.to)
        self.to += [v, u]
        self.cap += [0, cap] if saturated else [cap, 0]
        self.cost += [cost, -cost]
        self.adj[u].append(e)
        self.adj[v].append(e + 1)
        return e

    def add_convex(self, u: int, v: int, base: int, cap: int) -> int:
        """A unit through here costs ``base + 2k - 1`` for the k-th: half the rise of
        the square of a load going from ``base + 2k - 2`` to ``base + 2k``."""
        e = self.add(u, v, cap)
        self.convex[e] = base
        return e

    def flow(self, e: int) -> int:
        return self.cap[e ^ 1]

    def _arc_cost(self, e: int) -> int:
        base = self.convex.get(e & ~1)
        if base is None:
            return self.cost[e]
        k = self.cap[(e & ~1) + 1]  # units through it so far
        return base + 2 * k + 1 if not e & 1 else -(base + 2 * k - 1)

    def run(self, source: int, sink: int) -> int:
        """Send as much flow as possible from ``source`` to ``sink`` at least cost.

        Every cost of the starting residual graph must be non-negative (saturate the
        negative arcs first): then the potentials keep every reduced cost non-negative.
        """
        n = len(self.adj)
        potential = [0] * n
        total = 0
        while True:
            dist: list[int | None] = [None] * n
            via = [-1] * n
            dist[source] = 0
            heap = [(0, source)]
            while heap:
                d, u = heapq.heappop(heap)
                if d != dist[u]:
                    continue
                pu = potential[u]
                for e in self.adj[u]:
                    if self.cap[e] <= 0:
                        continue
                    v = self.to[e]
                    nd = d + self._arc_cost(e) + pu - potential[v]
                    dv = dist[v]
                    if dv is None or nd < dv:
                        dist[v], via[v] = nd, e
                        heapq.heappush(heap, (nd, v))
            if dist[sink] is None:
                return total
            for v, dv in enumerate(dist):
                if dv is not None:
                    potential[v] += dv
            push, v = None, sink
            while v != source:
                e = via[v]
                room = 1 if (e & ~1) in self.convex else self.cap[e]
                push = room if push is None else min(push, room)
                v = self.to[e ^ 1]
            assert push is not None
            v = sink
            while v != source:
                e = via[v]
                self.cap[e] -= push
                self.cap[e ^ 1] += push
                v = self.to[e ^ 1]
            total += push


def design_compute(
    *,
    questions: Mapping[Book, Sequence[Question]],
    readers: Mapping[Person, Iterable[Book]],
    fixed: Iterable[Slot] = (),
    seed: int = 0,
    titles: Mapping[Book, str] | None = None,
) -> Design:
    """Hand out a reader slot and a non-reader slot for every question that can have both.

    ``questions`` lists each book's questions; ``readers`` maps every active participant
    to the books they have read; ``fixed`` are slots already started (kept, and counted
    in the balance); ``titles`` names the books in the reasons (else ``str(book)``).
    Returns the new slots, every question left out (with the reason), the participants
    left out, and those whose read and not-read counts cannot match.
    """
    rng = random.Random(seed)
    books = list(questions)
    book_of = {q: b for b in books for q in questions[b]}
    read_by = {p: {b for b in bs if b in questions} for p, bs in readers.items()}
    design = Design()
    title = {b: (titles or {}).get(b, str(b)) for b in books}
    for person, read in read_by.items():
        if len(read) == len(books):
            design.excluded[person] = "has read every book in the study: nothing to balance with"
        elif not read:
            design.excluded[person] = "has read none of the books: nothing to balance with"
    # Sorted by name, then shuffled by the seed: who wins a tie between equal loads does
    # not depend on the order the caller happened to list people in.
    people = sorted((p for p in read_by if p not in design.excluded), key=str)
    rng.shuffle(people)
    fixed = [s for s in fixed if s.participant in read_by and s.question in book_of]
    have = Counter((s.question, s.read) for s in fixed)
    mine = {(s.question, s.participant) for s in fixed}
    fixed_read = Counter(s.participant for s in fixed if s.read)
    fixed_unread = Counter(s.participant for s in fixed if not s.read)

    readers_of = {b: [p for p in people if b in read_by[p]] for b in books}
    nonreaders_of = {b: [p for p in people if b not in read_by[p]] for b in books}
    # Per book: questions nobody has started (need both kinds), and those where one kind
    # has started and only its partner is missing.
    fresh: dict[Book, list[Question]] = {}
    need_reader: dict[Book, list[Question]] = {}
    need_nonreader: dict[Book, list[Question]] = {}
    for book in books:
        qs = questions[book]
        fresh[book] = [q for q in qs if not have[(q, True)] and not have[(q, False)]]
        need_reader[book] = [q for q in qs if have[(q, False)] and not have[(q, True)]]
        need_nonreader[book] = [q for q in qs if have[(q, True)] and not have[(q, False)]]

    # Lexicographic weights: one participant's balance unit outweighs every question,
    # one question outweighs every possible load cost.
    open_questions = sum(len(fresh[b] + need_reader[b] + need_nonreader[b]) for b in books)
    top_load = 2 * open_questions + 2 * len(fixed) + 2
    question_weight = len(people) * top_load * top_load + 1
    balance_weight = question_weight * (open_questions + 1) + 1

    hub, source, sink = 0, 1, 2  # hub: where half-started questions and imbalances meet
    book_in = {b: 3 + 2 * i for i, b in enumerate(books)}
    book_out = {b: 4 + 2 * i for i, b in enumerate(books)}
    first = 3 + 2 * len(books)
    person_in = {p: first + 2 * i for i, p in enumerate(people)}
    person_out = {p: first + 1 + 2 * i for i, p in enumerate(people)}
    graph = _MinCostFlow(first + 2 * len(people))
    excess: Counter[int] = Counter()

    def rewarded(u: int, v: int, cap: int, weight: int) -> int:
        # A negative-cost arc starts full; the search may only undo it at +weight.
        excess[v] += cap
        excess[u] -= cap
        return graph.add(u, v, cap, -weight, saturated=True)

    wide = open_questions + 1
    read_arc: dict[tuple[Person, Book], int] = {}
    unread_arc: dict[tuple[Person, Book], int] = {}
    for book in books:
        for person in readers_of[book]:
            read_arc[(person, book)] = graph.add(book_out[book], person_in[person], wide)
    for person in people:
        # One unit through a participant is one read and one not-read slot; their load
        # starts from the started slots, counted as if the gap below is made up.
        base = 2 * max(fixed_read[person], fixed_unread[person])
        graph.add_convex(person_in[person], person_out[person], base, wide)
        gap = fixed_read[person] - fixed_unread[person]
        if gap > 0:  # started more read than not-read: owes ``gap`` not-read slots
            rewarded(hub, person_out[person], gap, balance_weight)
        elif gap < 0:  # the reverse: owes read slots
            rewarded(person_in[person], hub, -gap, balance_weight)
        for book in books:
            if book not in read_by[person]:
                unread_arc[(person, book)] = graph.add(person_out[person], book_in[book], wide)
    cover_arc = {
        b: rewarded(book_in[b], book_out[b], len(fresh[b]), question_weight) for b in books
    }
    reader_arc = {
        b: rewarded(hub, book_out[b], len(need_reader[b]), question_weight) for b in books
    }
    nonreader_arc = {
        b: rewarded(book_in[b], hub, len(need_nonreader[b]), question_weight) for b in books
    }
    for node, amount in sorted(excess.items()):
        if amount > 0:
            graph.add(source, node, amount)
        elif amount < 0:
            graph.add(node, sink, -amount)
    routed = graph.run(source, sink)
    # Undoing every saturated arc is always a way through, so all of it is routed.
    assert routed == sum(a for a in excess.values() if a > 0)

    # Counts -> concrete questions, at random among equals.
    for book in books:
        covered = fresh[book][:]
        rng.shuffle(covered)
        left = covered[graph.flow(cover_arc[book]) :]
        covered = covered[: graph.flow(cover_arc[book])]
        got_reader = _pick(rng, need_reader[book], graph.flow(reader_arc[book]))
        got_nonreader = _pick(rng, need_nonreader[book], graph.flow(nonreader_arc[book]))
        missing_reader = [q for q in need_reader[book] if q not in set(got_reader)]
        missing_nonreader = [q for q in need_nonreader[book] if q not in set(got_nonreader)]
        for kind, pool, arcs, takers in (
            (True, [*covered, *got_reader], read_arc, readers_of[book]),
            (False, [*covered, *got_nonreader], unread_arc, nonreaders_of[book]),
        ):
            rng.shuffle(pool)
            for person in takers:
                n = graph.flow(arcs[(person, book)])
                # Never twice the same question for one person (only possible when a
                # started slot contradicts its participant's declaration).
                picked = [q for q in pool if (q, person) not in mine][:n]
                for q in picked:
                    pool.remove(q)
                    design.slots.append(Slot(q, person, kind))
        r, u = len(readers_of[book]), len(nonreaders_of[book])
        design.uncovered += [(q, _why_fresh(title[book], r, u)) for q in left]
        design.uncovered += [(q, _why_half(title[book], True, r)) for q in missing_reader]
        design.uncovered += [(q, _why_half(title[book], False, u)) for q in missing_nonreader]

    counts = design.counts(fixed)
    for person in sorted(people, key=str):
        read, unread = counts.get(person, (0, 0))
        if read != unread:
            owed = "not-read" if read > unread else "read"
            design.unbalanced[person] = (
                f"{read} read vs {unread} not-read: {fixed_read[person]} read and "
                f"{fixed_unread[person]} not-read questions were already started, and no "
                f"further {owed} question can go to them without unbalancing someone else"
            )
        elif read == 0:
            read_books = [b for b in books if b in read_by[person]]
            design.excluded[person] = _why_nothing(
                read=[title[b] for b in read_books],
                unread=[title[b] for b in books if b not in read_by[person]],
                any_nonreader=any(nonreaders_of[b] for b in read_books),
                any_reader=any(readers_of[b] for b in books if b not in read_by[person]),
                any_open=any(fresh[b] or need_reader[b] for b in read_books),
            )
    # In the study's order: the leftovers of a book were picked at random.
    position = {q: (i, j) for i, b in enumerate(books) for j, q in enumerate(questions[b])}
    design.uncovered.sort(key=lambda qr: position[qr[0]])
    return design


def _pick(rng: random.Random, qs: Sequence[Question], n: int) -> list[Question]:
    return rng.sample(list(qs), n) if n < len(qs) else list(qs)


def _why_fresh(title: str, readers: int, nonreaders: int) -> str:
    if not readers:
        return f"no participant has read {title}"
    if not nonreaders:
        return f"every participant has read {title}"
    return (
        f"left out to keep read = not-read: the readers ({readers}) and non-readers "
        f"({nonreaders}) of {title} have no question on another book left to balance it with"
    )


def _why_half(title: str, reader: bool, takers: int) -> str:
    """Why the missing partner of a started slot (a reader when ``reader``) was not found."""
    started, missing = ("not-read", "reader") if reader else ("read", "non-reader")
    if not takers:
        nobody = "no participant has read" if reader else "every participant has read"
        return f"its {started} answer has started, but {nobody} {title}: no {missing} for it"
    return (
        f"its {started} answer has started, but no {missing} of {title} can take it "
        "without unbalancing someone"
    )


def _why_nothing(
    *, read: list[str], unread: list[str], any_nonreader: bool, any_reader: bool, any_open: bool
) -> str:
    """Why a participant who declared some books but not all gets no question at all."""
    if not any_nonreader:
        return (
            f"every book they have read ({', '.join(read)}) has been read by every other "
            "participant: no question they can answer as a reader"
        )
    if not any_reader:
        return (
            f"nobody else has read the books they have not read ({', '.join(unread)}): "
            "no question they can answer as a non-reader"
        )
    if not any_open:
        return "every question on the books they have read already has its reader"
    return (
        "no question left that keeps the design balanced (more readers of their books "
        "than questions)"
    )
