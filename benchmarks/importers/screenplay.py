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
Character (the main ones ``is_main``, cue spellings in ``aliases``), so
``export_benchmark tom-in-amc`` writes it in the release's JSON layout and that file
imports back with ``import_benchmark tom-in-amc`` onto the same rows.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import transaction

from ..models import Benchmark, Character, Scene, SpeakerInstance, Split, Work
from .base import (
    BenchmarkImporter,
    ImportDataError,
    ImportReport,
    ProgressCallback,
    input_size_check,
    upsert,
)
from .screenplay_parser import (
    Action,
    CharacterInfo,
    NameMasker,
    Screenplay,
    ScreenplayError,
    characters,
    gc_paused,
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
        testing = sum(1 for s in movie.scenes if s["part"] == Scene.Part.TESTING)
        silent = sum(1 for s in movie.scenes for n in s["char_map"] if not s["char_counts"][n])
        title_from = "--title" if self.title else ("the script" if play.title else "the file name")
        report.notes.append(
            f"{path.name}: {movie.title!r} (title from {title_from}; {play.layout} layout, "
            f"{play.encoding}): {len(movie.scenes)} scenes ({len(movie.scenes) - testing} "
            f"history, {testing} testing), {len(movie.characters)} speaking characters, "
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
            report.warn(f"{path}: no main character in a testing scene; nothing to guess")

    # -- writing -----------------------------------------------------------------

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
    common = lowercase_words(play.scenes)
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
