"""Raw screenplays (IMSDb plain text, Fountain) built into ToM-in-AMC movies.

This redoes the paper's construction on one script (``papers/tom-in-amc.md`` §4):
split the script into scenes at its INT./EXT. headings, take the five characters
with the most utterances as the main characters (the candidates), keep the first
3/5 of the scenes as the history a rater reads (``Scene.Part.TRAINING``, names in
clear) and the rest as testing scenes, where each main character who speaks or is
named in the narration is masked as P0, P1, … — in the speaker slot, the heading,
action lines and parentheticals, not in what characters say, as in the released
data (a masked character who only appears in the action has 0 lines).

Codes follow the order in which the masked characters first appear in the scene, read
top to bottom: the heading, then each line in turn (an action line's names left to
right; a dialogue line's speaker, then names in its parentheticals). The first to
appear is P0, as in TVShowGuess and the paper's prompts (``P0: …`` opens the scene).
Nothing in it depends on the process, so two imports of one script (any
``PYTHONHASHSEED``) give the same codes, and a re-import changes nothing.

The result is an ordinary ``tom-in-amc`` Work (kind movie) with every speaker as a
Character (the main ones ``is_main``; in ``aliases`` the cue spellings and, for a main
character, the full and titled names the script calls it by, see
:func:`names_in_text`, masked as a whole like a cue), so
``export_benchmark tom-in-amc`` writes it in the release's JSON layout and that file
imports back with ``import_benchmark tom-in-amc`` onto the same rows.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from django.db import transaction

from common.gc_pause import gc_paused

from ..models import Benchmark, Character, Scene, SpeakerInstance, Split, Work
from ..perturbation import FUNCTION_WORDS, GIVEN_NAME_TITLES, TITLES, guess_gender
from ..selectors import test_scenes
from .base import (
    BenchmarkImporter,
    ImportDataError,
    ImportReport,
    ProgressCallback,
    input_size_check,
    upsert,
)
from .screenplay_parser import (
    AGE_WORDS,
    TITLE_WORDS,
    Action,
    CharacterInfo,
    NameMasker,
    ParsedScene,
    Screenplay,
    ScreenplayError,
    characters,
    group_members,
    lowercase_words,
    mask_words,
    name_key,
    parse_screenplay,
)

MAIN_CHARACTERS = 5  # "the top-5 characters with the most dialogue utterances"
HISTORY_SHARE = (3, 5)  # "the first 3/5 of the movie script for training"
SUFFIXES = (".txt", ".fountain", ".spmd")
EXAMPLES = 5  # problems quoted per kind in a warning
KEY_MAX = Work._meta.get_field("key").max_length
# A word the script also writes in lower case ("Hill", "Will") is a surname after a
# given name only when seen this often as one ("Jenny Hill" 8 times).
SEEN_AS_NAME = 3


@dataclass
class ScreenplayImportReport(ImportReport):
    """The usual counts and warnings, plus what the parse made of each script."""

    notes: list[str] = field(default_factory=list)

    def summary_lines(self) -> list[str]:
        return [*self.notes, *super().summary_lines()]

    def as_dict(self) -> dict[str, Any]:
        return {**super().as_dict(), "notes": list(self.notes)}


@dataclass
class Movie:
    title: str
    source: str
    characters: list[CharacterInfo]  # main ones first, in candidate order
    mains: list[str]  # lower-case names, the candidates
    scenes: list[dict[str, Any]]  # Scene rows without work_id
    instances: list[tuple[str, str, str]]  # (scene source_id, code, character name)


class ScreenplayImporter(BenchmarkImporter):
    """Import one screenplay file (or every script in a directory) as a movie."""

    format_name = "screenplay"
    help = "raw screenplay (IMSDb plain text or .fountain) -> a ToM-in-AMC movie"

    def __init__(
        self,
        *,
        split: str = "",
        progress: ProgressCallback | None = None,
        title: str | None = None,
    ) -> None:
        super().__init__(split=split, progress=progress)
        self.report = ScreenplayImportReport()
        self.title = (title or "").strip() or None

    def run(self, path: Path) -> ImportReport:
        if path.is_dir():
            paths = sorted(p for p in path.iterdir() if p.suffix.lower() in SUFFIXES)
            if not paths:
                raise ImportDataError(f"no {', '.join(SUFFIXES)} files in this folder", path=path)
            if self.title and len(paths) > 1:
                raise ImportDataError("a title names one movie; this folder has more", path=path)
        else:
            paths = [path]
        for p in paths:  # every size before any parsing
            input_size_check(p, limit="screenplay")
        # Building the movie and its rows keeps as many objects alive as the parse.
        with gc_paused():
            movies = [self._parse(p) for p in paths]
            titles = Counter(m.title for m in movies)
            for movie in movies:
                if titles[movie.title] > 1:
                    raise ImportDataError(
                        f"title {movie.title!r} given by more than one script", path=movie.source
                    )
            for movie in movies:
                self._write(movie)
        return self.report

    # -- parsing -----------------------------------------------------------------

    def _parse(self, path: Path) -> Movie:
        input_size_check(path, limit="screenplay")
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise ImportDataError("file not found", path=path) from None
        except OSError as exc:
            raise ImportDataError(f"cannot read file: {exc}", path=path) from None
        try:
            play = parse_screenplay(data, fountain=path.suffix.lower() == ".fountain")
        except ScreenplayError as exc:
            record = f"line {exc.line}" if exc.line else None
            raise ImportDataError(exc.message, path=path, record=record) from None
        title = self.title or play.title or path.stem.replace("_", " ").strip()
        if len(title) > KEY_MAX:
            raise ImportDataError(
                f"title longer than {KEY_MAX} characters: {title[:60]!r}…", path=path
            )
        movie = build_movie(play, title=title, source=path.name)
        self._report_parse(path, play, movie)
        self.progress(len(movie.scenes))
        return movie

    def _report_parse(self, path: Path, play: Screenplay, movie: Movie) -> None:
        report = self.report
        history = sum(1 for s in movie.scenes if s["part"] == Scene.Part.TRAINING)
        silent = sum(1 for s in movie.scenes for n in s["char_map"] if not s["char_counts"][n])
        title_from = "--title" if self.title else ("the script" if play.title else "the file name")
        report.notes.append(
            f"{path.name}: {movie.title!r} (title from {title_from}; {play.layout} layout, "
            f"{play.encoding}): {len(movie.scenes)} scenes ({history} history), "
            f"{len(movie.characters)} speaking characters, "
            f"{len(movie.instances)} masked instances ({silent} only named in the action)"
        )
        counts = {c.name.lower(): c.count for c in movie.characters}
        report.notes.append(
            "  main characters (utterances): "
            + ", ".join(f"{name} {counts[name]}" for name in movie.mains)
        )
        if play.dropped:
            report.notes.append(
                "  dropped: " + ", ".join(f"{n} {kind}" for kind, n in play.dropped.most_common())
            )
        if len(play.line_endings) > 1:
            report.notes.append(
                "  mixed line endings: "
                + ", ".join(f"{n} {kind}" for kind, n in play.line_endings.most_common())
            )
        for kind, where in play.repaired.items():
            report.warn(f"{path}: {kind} on {len(where)} line(s): {_examples(where)}")
        if play.unparsed:
            reasons = Counter(why for _, _, why in play.unparsed)
            report.warn(
                f"{path}: {len(play.unparsed)} line(s) could not be parsed and were kept as "
                f"action text ({', '.join(f'{n} {why}' for why, n in reasons.most_common())}): "
                + _examples([(line, text) for line, text, _ in play.unparsed])
            )
        if len(movie.mains) < MAIN_CHARACTERS:
            report.warn(
                f"{path}: only {len(movie.mains)} character(s) speak; "
                f"ToM-in-AMC uses {MAIN_CHARACTERS} candidates"
            )
        if not movie.instances:
            report.warn(f"{path}: no main character in a test scene; nothing to guess")

    # -- writing -----------------------------------------------------------------

    def _report_test_scenes(self, movie: Movie, work_id: int) -> None:
        """The work's test scenes as stored, counted by the rule the study form counts
        them by (``test_scenes``), and the later scenes with nothing to guess."""
        tests = test_scenes(works=[work_id]).count()
        later = Scene.objects.filter(work_id=work_id, part=Scene.Part.TESTING).count()
        note = f"{movie.source}: {tests} test scenes (a masked speaker to guess)"
        if later > tests:
            note += f"; {later - tests} later scene(s) with no main character to guess"
        self.report.notes.append(note)

    def _write(self, movie: Movie) -> None:
        report = self.report
        existing = Work.objects.filter(benchmark=Benchmark.TOM_IN_AMC, key=movie.title).first()
        # The format keeps every movie under a split; a new screenplay is an unseen
        # movie, a test task, unless the researcher says otherwise.
        split = self.split or (existing.split if existing and existing.split else Split.TEST)
        work_ids = upsert(
            Work,
            [
                {
                    "benchmark": Benchmark.TOM_IN_AMC,
                    "key": movie.title,
                    "title": movie.title,
                    "kind": Work.Kind.MOVIE,
                    "split": split,
                    "source": movie.source,
                    "extra": {},
                }
            ],
            key_fields=["benchmark", "key"],
            scope={"benchmark": Benchmark.TOM_IN_AMC, "key": movie.title},
            report=report,
            source=movie.source,
        )
        work_id = work_ids[(Benchmark.TOM_IN_AMC, movie.title)]
        # Aliases an annotator added stay; the script's spellings are added to them.
        # Gender is left out of the rows for the same reason.
        old_aliases = dict(Character.objects.filter(work_id=work_id).values_list("name", "aliases"))
        main = set(movie.mains)
        character_ids = upsert(
            Character,
            [
                {
                    "work_id": work_id,
                    "name": info.name.lower(),
                    "position": position,
                    "utterance_count": info.count,
                    "is_main": info.name.lower() in main,
                    "aliases": _merge_aliases(old_aliases.get(info.name.lower()), info.variants),
                }
                for position, info in enumerate(movie.characters)
            ],
            key_fields=["work_id", "name"],
            scope={"work_id": work_id},
            report=report,
            source=movie.source,
        )
        scene_ids = upsert(
            Scene,
            [{"work_id": work_id, **row} for row in movie.scenes],
            key_fields=["work_id", "source_id"],
            scope={"work_id": work_id},
            report=report,
            source=movie.source,
        )
        upsert(
            SpeakerInstance,
            [
                {
                    "scene_id": scene_ids[(work_id, source_id)],
                    "code": code,
                    "gold_character_id": character_ids[(work_id, name)],
                    "candidates": movie.mains,
                }
                for source_id, code, name in movie.instances
            ],
            key_fields=["scene_id", "code"],
            scope={"scene__work_id": work_id},
            report=report,
            source=movie.source,
        )
        self._report_test_scenes(movie, work_id)
        stale = (
            Scene.objects.filter(work_id=work_id)
            .exclude(source_id__in=[row["source_id"] for row in movie.scenes])
            .count()
        )
        if stale:
            # Deleting them could take study responses with them; say so instead.
            report.warn(
                f"{movie.source}: {stale} scene(s) of {movie.title!r} from an earlier import "
                "are not in this script any more and were left in place"
            )


@transaction.atomic
def screenplay_import(
    *,
    path: Path | str,
    title: str | None = None,
    split: str = "",
    progress: ProgressCallback | None = None,
) -> ScreenplayImportReport:
    """Import one screenplay (or a folder of them) atomically; see the module docstring.

    Raises :class:`~benchmarks.importers.ImportDataError` naming the file (and line)
    when a script cannot be used; nothing is written then.
    """
    importer = ScreenplayImporter(split=split, progress=progress, title=title)
    importer.run(Path(path))
    return importer.report


def build_movie(play: Screenplay, *, title: str, source: str) -> Movie:
    """Scenes in the ToM-in-AMC layout, masked codes and instances, for one script."""
    infos, canonical = characters(play.scenes)
    common = lowercase_words(play.scenes)
    mains = [info for info in infos if not info.group][:MAIN_CHARACTERS]
    # The full and titled names the script calls a lead by are spellings of it too:
    # stored as aliases, masked whole ("EDWARD BLOOM" -> "P0", not "P0 BLOOM").
    found = names_in_text(play.scenes, infos, mains, common)
    infos = [replace(info, variants=info.variants + found.get(info.key, [])) for info in infos]
    mains = [info for info in infos if not info.group][:MAIN_CHARACTERS]
    main_keys = {info.key for info in mains}
    ordered = mains + [info for info in infos if info.key not in main_keys]
    name_of = {info.key: info.name.lower() for info in infos}
    groups = {info.key: info.group for info in infos}
    owners: dict[str, set[str]] = {}
    for info in infos:
        for variant in info.variants:
            for word in name_key(variant).split():
                owners.setdefault(word.removesuffix("'S"), set()).add(info.key)
    forms = {
        info.key: mask_words(
            info,
            shared=lambda word, key=info.key: bool(owners.get(word, set()) - {key}),
            common=common,
        )
        for info in mains
    }
    total = len(play.scenes)
    history = total * HISTORY_SHARE[0] // HISTORY_SHARE[1]
    rows: list[dict[str, Any]] = []
    instances: list[tuple[str, str, str]] = []
    masker = NameMasker(forms, common)
    for position, scene in enumerate(play.scenes):
        testing = position >= history
        part = Scene.Part.TESTING if testing else Scene.Part.TRAINING
        source_id = f"{part}-{position - history if testing else position:04d}"
        speakers: Counter = Counter()
        # Main characters in the scene, speaking or not, in reading order.
        present: list[str] = masker.names_in(scene.heading)
        for item in scene.items:
            if isinstance(item, Action):
                present += masker.names_in(item.text)
                continue
            key = canonical[name_key(item.cue)]
            speakers[key] += 1
            if key in main_keys:
                present.append(key)
            elif groups[key]:  # "MARA AND JONAH"
                present += [canonical[m] for m in group_members(key) if m in canonical]
            present += masker.names_in(name_of[key], any_case=True)
            present += (n for kind, t in item.parts if kind == "paren" for n in masker.names_in(t))
        # Like the release (a masked "ivo": 0 who only appears in the action), every
        # main character the scene's narration names is masked, not only the speakers:
        # a name left in the action would rule that candidate out.
        masked = [key for key in dict.fromkeys(present) if key in main_keys] if testing else []
        codes = {key: f"P{n}" for n, key in enumerate(masked)}
        lines: list[dict[str, str]] = []
        if scene.heading:
            lines.append({"type": "scene", "title": masker.mask(scene.heading, codes), "text": ""})
        for item in scene.items:
            if isinstance(item, Action):
                lines.append(
                    {"type": "scene", "title": "NULL", "text": masker.mask(item.text, codes)}
                )
                continue
            key = canonical[name_key(item.cue)]
            speaker = codes.get(key) or masker.mask(name_of[key], codes, any_case=True)
            text = " ".join(
                masker.mask(t, codes) if kind == "paren" else t for kind, t in item.parts
            )
            lines.append({"type": "dialog", "title": speaker, "text": text})
        for key in masked:
            speakers.setdefault(key, 0)
        char_counts = {name_of[key]: n for key, n in speakers.items()}
        char_map = {name_of[key]: code for key, code in sorted(codes.items(), key=_code_order)}
        rows.append(
            {
                "source_id": source_id,
                "position": position,
                "part": part,
                "heading": _heading(lines),
                "lines": lines,
                "participants": list(char_counts),
                "char_counts": char_counts,
                "char_map": char_map,
                "extra": {},
            }
        )
        instances.extend((source_id, code, name) for name, code in char_map.items())
    return Movie(
        title=title,
        source=source,
        characters=ordered,
        mains=[info.name.lower() for info in mains],
        scenes=rows,
        instances=instances,
    )


_NAME_WORD = r"[^\W\d_]+(?:-[^\W\d_]+)*"  # "Kenobi", "Obi-Wan"; no possessive
_BEFORE = r"(?<![\w'\u2019.-])"  # a whole word: not after "'" ("Ben's") or "St."
# "General Kenobi" is a titled surname, "Master Luke" a titled given name.
_TITLE_RE = "|".join(
    sorted(
        (t for t in TITLE_WORDS if t.lower() not in GIVEN_NAME_TITLES), key=lambda t: (-len(t), t)
    )
)
# Titles that go with a surname: "Mr. Keating" makes KEATING a surname, "Master Luke"
# does not make LUKE one.
_SURNAME_TITLE_RE = "MRS|MR|MS|MISS|DR|PROFESSOR|PROF"


def _texts(scenes: list[ParsedScene]) -> Iterator[str]:
    for scene in scenes:
        yield scene.heading
        for item in scene.items:
            if isinstance(item, Action):
                yield item.text
            else:
                yield from (text for _, text in item.parts)


def _style(word: str) -> str:
    """ "upper", "title" ("Bloom", "McAllister") or "lower": a name's words share one."""
    if word.isupper():
        return "upper"
    return "title" if word[:1].isupper() else "lower"


def _pairs(texts: list[str], first: str, second: str) -> Counter:
    """(first word, second word) as written, for each "<first> <second>" in ``texts``."""
    pattern = re.compile(rf"{_BEFORE}({first})\s+({second})(?!\w)", re.IGNORECASE)
    return Counter((m.group(1), m.group(2)) for t in texts for m in pattern.finditer(t))


def names_in_text(
    scenes: list[ParsedScene],
    infos: list[CharacterInfo],
    mains: list[CharacterInfo],
    common: set[str],
) -> dict[str, list[str]]:
    """The full and titled names the script calls each main character by, upper case.

    Cues are mostly one given name ("EDWARD", "HAN"); the narration and dialogue say
    "Edward Bloom", "Han Solo". Three conservative rules over whole words of the
    headings, action lines, speech and parentheticals:

    - Full name: the lead's one-word cue followed by a capitalised word ("Edward
      Bloom", "EDWARD BLOOM"). Both words in one style, title case or capitals
      ("Edward WHISTLES" is a sound, "HAN" over "Thanks" a cue over its speech); the
      cue word not possessive ("Luke's X-wing"); the next word of two letters or more,
      no title, age or function word ("EDWARD AND"), no character's first cue word
      ("Luke Threepio"), and a word the script also writes in lower case ("Hill") only
      if seen ``SEEN_AS_NAME`` times or more in title case after the cue word.
    - Title + surname: a title before one of the lead's surnames ("Mr. Keating",
      "General Kenobi"). The surnames are its full names' last words, a titled cue's
      ("MR. NOLAN") and a one-word cue the script writes after Mr., Mrs., Ms., Miss,
      Dr. or Prof. ("KEATING"). Only a surname that no other character's cue or full
      name has: "Mr. Bloom" may be Edward or Will, "Mr. Perry" is Neil's father.
      Titles of the other gender than most of them are left out ("Mrs. Keating").
    - Given name + surname of a lead called by its surname: a capitalised word that
      ``gender-guesser`` knows as a first name before it ("John Keating"), with the
      guards of the first rule and the one-owner condition of the second.

    Each form once (spellings that differ only in stops and spaces are one), most
    frequent first. Only the script is read, so a re-import finds the same forms.
    """
    texts = [t for t in _texts(scenes) if t]
    first_words = set()
    for info in infos:
        words = [w for w in info.key.split() if w not in AGE_WORDS]
        if words and words[0] not in TITLE_WORDS:
            first_words.add(words[0].removesuffix("'S"))

    def is_name(word: str, beside: str, title_case_seen: int) -> bool:
        return (
            len(word) >= 2
            and _style(word) == _style(beside) != "lower"
            and word.upper() not in TITLE_WORDS | AGE_WORDS | first_words
            and word.casefold() not in FUNCTION_WORDS
            and (word.lower() not in common or title_case_seen >= SEEN_AS_NAME)
        )

    def title_case_seen(pairs: Counter, index: int) -> Counter:
        seen: Counter = Counter()
        for pair, n in pairs.items():
            if _style(pair[index]) == "title":
                seen[pair[index].upper()] += n
        return seen

    found: dict[str, Counter] = {info.key: Counter() for info in mains}
    surnames: dict[str, list[str]] = {}  # main key -> its surnames, upper case
    called_by: dict[str, str] = {}  # main key -> the surname its cue is
    for info in mains:
        words = [w for w in info.key.split() if w not in AGE_WORDS]
        surnames[info.key] = []
        if (
            len(words) == 2
            and words[0] in TITLE_WORDS
            and words[0].lower() not in GIVEN_NAME_TITLES
        ):
            called_by[info.key] = words[1]
        if len(words) != 1 or words[0] in TITLE_WORDS:
            continue
        pairs = _pairs(texts, re.escape(words[0]), _NAME_WORD)
        seen = title_case_seen(pairs, 1)
        for (given, surname), n in pairs.items():
            if is_name(surname, given, seen[surname.upper()]):
                found[info.key][f"{given} {surname}".upper()] += n
                surnames[info.key].append(surname.upper())
        if _pairs(texts, rf"(?:{_SURNAME_TITLE_RE})\.?", re.escape(words[0])):
            called_by[info.key] = words[0]
    owners: dict[str, set[str]] = {}
    for info in infos:
        for word in info.key.split():
            owners.setdefault(word, set()).add(info.key)
    for key, names in surnames.items():
        for surname in names:
            owners.setdefault(surname, set()).add(key)
    for info in mains:
        own = [called_by[info.key]] if info.key in called_by else []
        for surname in dict.fromkeys([*surnames[info.key], *own]):
            if owners.get(surname) != {info.key}:
                continue
            titled: Counter = Counter()
            for (title, name), n in _pairs(
                texts, rf"(?:{_TITLE_RE})\.?", re.escape(surname)
            ).items():
                if _style(title.rstrip(".")) == _style(name) != "lower":
                    titled[f"{title} {name}".upper()] += n
            gender_of = {
                form: TITLES.get(form.split()[0].rstrip(".").lower(), "") for form in titled
            }
            genders: Counter = Counter()
            for form, n in titled.items():
                genders[gender_of[form]] += n
            majority = next((g for g, _ in genders.most_common() if g), "")
            for form, n in titled.items():
                if gender_of[form] in ("", majority):
                    found[info.key][form] += n
            if surname != called_by.get(info.key):
                continue
            pairs = _pairs(texts, _NAME_WORD, re.escape(surname))
            seen = title_case_seen(pairs, 0)
            for (given, name), n in pairs.items():
                if (
                    is_name(given, name, seen[given.upper()])
                    and guess_gender(given)[1] != "unknown"
                ):
                    found[info.key][f"{given} {name}".upper()] += n
    cues = {info.key: {name_key(v) for v in info.variants} for info in mains}
    out = {key: _spellings(counts, cues[key]) for key, counts in found.items()}
    return {key: forms for key, forms in out.items() if forms}


def _spellings(counts: Counter, cues: set[str]) -> list[str]:
    """Most frequent first; "MR. KEATING" and "MR KEATING" are one form; no cue again."""
    out: dict[str, str] = {}
    for form, _ in counts.most_common():
        if name_key(form) not in cues:
            out.setdefault(name_key(form), form)
    return list(out.values())


def _code_order(item: tuple[str, str]) -> int:
    return int(item[1][1:])


def _heading(lines: list[dict[str, str]]) -> str:
    # As the tom-in-amc importer derives it, so an export read back changes nothing.
    for line in lines:
        if line["type"] == "scene" and line["title"] not in (None, "NULL"):
            return line["title"]
    return ""


def _merge_aliases(old: list[str] | None, variants: list[str]) -> list[str]:
    aliases = list(old or [])
    seen = {a.upper() for a in aliases}
    for variant in variants:
        if variant.upper() not in seen:
            seen.add(variant.upper())
            aliases.append(variant.upper())
    return aliases


def _examples(where: list[tuple[int, str]]) -> str:
    shown = "; ".join(
        f"line {line}: {text[:70]!r}" if text else f"line {line}" for line, text in where[:EXAMPLES]
    )
    more = len(where) - EXAMPLES
    return shown + (f"; and {more} more" if more > 0 else "")
