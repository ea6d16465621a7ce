"""The CharToM-QA human-study design (paper 6.3), as pure Python.

Every sampled question goes to one participant who has read its book and one who has
not, and each participant gets as many questions about books they have read as about
books they have not (the paper: 8 participants, 150 questions from 5 books, 600 picks
with the two plot windows).

How: per book, slots are counts, so the design is two flow problems on a small graph
(source -> book -> participant -> sink). The read slots are spread first, with each
participant's capacity raised one at a time from an equal share, so loads differ by at
most one where the declarations allow it; then the not-read slots, with each
participant's capacity set to their read count, so read and not-read match. Only then
are the counts turned into concrete questions. Slots already answered (``fixed``) are
kept as they are, so a late joiner or a withdrawal rebalances only what nobody has
started.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict, deque
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
    # Participants left out entirely, with the reason (read every book, or none).
    excluded: dict[Person, str] = field(default_factory=dict)

    def counts(self, fixed: Iterable[Slot] = ()) -> dict[Person, tuple[int, int]]:
        """(read, not read) per participant, counting ``fixed`` slots too."""
        out: dict[Person, list[int]] = defaultdict(lambda: [0, 0])
        for slot in [*fixed, *self.slots]:
            out[slot.participant][0 if slot.read else 1] += 1
        return {p: (r, n) for p, (r, n) in out.items()}


class _Flow:
    """Edmonds-Karp on a residual graph small enough (books + people) to keep it simple."""

    def __init__(self) -> None:
        self.cap: dict[Hashable, dict[Hashable, int]] = defaultdict(lambda: defaultdict(int))

    def add(self, a: Hashable, b: Hashable, capacity: int) -> None:
        self.cap[a][b] += capacity
        self.cap[b][a] += 0  # the reverse edge exists for the residual graph

    def augment(self, source: Hashable, sink: Hashable) -> int:
        """Push flow along shortest augmenting paths until none is left; returns the flow."""
        total = 0
        while True:
            parent: dict[Hashable, Hashable] = {source: source}
            queue = deque([source])
            while queue and sink not in parent:
                node = queue.popleft()
                for nxt, c in self.cap[node].items():
                    if c > 0 and nxt not in parent:
                        parent[nxt] = node
                        queue.append(nxt)
            if sink not in parent:
                return total
            bottleneck, node = None, sink
            while node != source:
                c = self.cap[parent[node]][node]
                bottleneck = c if bottleneck is None else min(bottleneck, c)
                node = parent[node]
            node = sink
            while node != source:
                self.cap[parent[node]][node] -= bottleneck
                self.cap[node][parent[node]] += bottleneck
                node = parent[node]
            total += bottleneck

    def flow_on(self, a: Hashable, b: Hashable) -> int:
        """Flow pushed from ``a`` to ``b`` (the reverse residual capacity)."""
        return self.cap[b][a]


_SOURCE, _SINK = ("source",), ("sink",)


def _spread(
    *,
    demand: Mapping[Book, int],
    eligible: Mapping[Book, Sequence[Person]],
    people: Sequence[Person],
    start: Mapping[Person, int],
    already: Mapping[Person, int],
) -> dict[tuple[Person, Book], int]:
    """Counts per (person, book) meeting ``demand``, loads as even as the graph allows.

    Each person's capacity starts at ``start`` and is raised one at a time, always for
    the person with the lowest total so far (``already`` + capacity), while that lets
    more flow through.
    """
    flow = _Flow()
    for book, n in demand.items():
        if n <= 0:
            continue
        flow.add(_SOURCE, ("book", book), n)
        for person in eligible.get(book, ()):
            flow.add(("book", book), ("person", person), n)
    capacity = {p: max(0, start.get(p, 0)) for p in people}
    for person in people:
        flow.add(("person", person), _SINK, capacity[person])
    pushed = flow.augment(_SOURCE, _SINK)
    wanted = sum(n for n in demand.values() if n > 0)
    while pushed < wanted:
        for person in sorted(people, key=lambda p: (already.get(p, 0) + capacity[p], str(p))):
            flow.add(("person", person), _SINK, 1)
            capacity[person] += 1
            more = flow.augment(_SOURCE, _SINK)
            if more:
                pushed += more
                break
            flow.cap[("person", person)][_SINK] -= 1  # no path through them: undo
            capacity[person] -= 1
        else:
            break  # nobody can take more: the rest is uncoverable
    return {
        (person, book): flow.flow_on(("book", book), ("person", person))
        for book in demand
        for person in eligible.get(book, ())
        if flow.flow_on(("book", book), ("person", person))
    }


def design_compute(
    *,
    questions: Mapping[Book, Sequence[Question]],
    readers: Mapping[Person, Iterable[Book]],
    fixed: Iterable[Slot] = (),
    seed: int = 0,
) -> Design:
    """Hand out a reader slot and a non-reader slot for every question.

    ``questions`` lists each book's questions; ``readers`` maps every active participant
    to the books they have read; ``fixed`` are slots already started (kept, and counted
    in the balance). Returns the new slots and every slot that could not be filled.
    """
    books = list(questions)
    read_by = {p: set(b for b in bs if b in questions) for p, bs in readers.items()}
    design = Design()
    for person, read in read_by.items():
        if len(read) == len(books):
            design.excluded[person] = "has read every book in the study: nothing to balance with"
        elif not read:
            design.excluded[person] = "has read none of the books: nothing to balance with"
    people = [p for p in read_by if p not in design.excluded]
    fixed = [s for s in fixed if s.participant in read_by]
    have = Counter((s.question, s.read) for s in fixed)
    mine = {(s.question, s.participant) for s in fixed}
    fixed_read = Counter(s.participant for s in fixed if s.read)
    fixed_unread = Counter(s.participant for s in fixed if not s.read)

    eligible_read = {b: [p for p in people if b in read_by[p]] for b in books}
    eligible_unread = {b: [p for p in people if b not in read_by[p]] for b in books}
    need: dict[bool, dict[Book, list[Question]]] = {True: {}, False: {}}
    for book in books:
        for kind, eligible, why in (
            (True, eligible_read, f"no participant has read {book}"),
            (False, eligible_unread, f"every participant has read {book}"),
        ):
            open_ = [q for q in questions[book] if not have[(q, kind)]]
            if open_ and not eligible[book]:
                design.uncovered.extend((q, why) for q in open_)
                open_ = []
            need[kind][book] = open_

    total_read = sum(len(q) for q in need[True].values()) + sum(fixed_read[p] for p in people)
    share = total_read // len(people) if people else 0
    read_counts = _spread(
        demand={b: len(qs) for b, qs in need[True].items()},
        eligible=eligible_read,
        people=people,
        start={p: share - fixed_read[p] for p in people},
        already=fixed_read,
    )
    reads = Counter(fixed_read)
    for (person, _book), n in read_counts.items():
        reads[person] += n
    unread_counts = _spread(
        demand={b: len(qs) for b, qs in need[False].items()},
        eligible=eligible_unread,
        people=people,
        start={p: reads[p] - fixed_unread[p] for p in people},
        already=fixed_unread,
    )

    rng = random.Random(seed)
    for kind, counts in ((True, read_counts), (False, unread_counts)):
        for book, open_ in need[kind].items():
            pool = list(open_)
            rng.shuffle(pool)
            takers = [p for p in (eligible_read if kind else eligible_unread)[book]]
            rng.shuffle(takers)
            for person in takers:
                n = counts.get((person, book), 0)
                picked = [q for q in pool if (q, person) not in mine][:n]
                for q in picked:
                    pool.remove(q)
                    design.slots.append(Slot(q, person, kind))
            reason = (
                f"the readers of {book} cannot take more without unbalancing the design"
                if kind
                else f"the non-readers of {book} cannot take more without unbalancing the design"
            )
            design.uncovered.extend((q, reason) for q in pool)
    return design
