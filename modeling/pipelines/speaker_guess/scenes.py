"""Scenes as a model reads them: rendered, masked or unmasked, perturbed, title withheld.

Scenes are stored in the ToM-in-AMC line layout. A testing scene is masked already
(``P0`` … in the speaker slot and the narration, ``char_map`` name -> code). A history
scene built from a screenplay is in clear; to serve as a demonstration it is masked
here the same way (main characters who speak or are named, codes in order of
appearance). For ToMPro's stage 1, which reads scenes "with character names", a
masked scene is unmasked with its ``char_map``.

A :class:`WorkView` is how one run shows one work: names through the work's
perturbation map (``benchmarks.perturbation``, the study app's implementation) when the
run perturbs, and the title withheld wherever it would appear.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from benchmarks.models import Character, Scene, Work
from benchmarks.perturbation import build_name_map, display_name, display_text, redact_titles

NULL_TITLE = "NULL"
_CODE_WORD_RE = re.compile(r"(?<!\w)P\d{1,2}(?!\w)")


def render_lines(lines: list[dict[str, str]]) -> str:
    """One line per heading, narration or utterance (``SPEAKER: text``)."""
    out = []
    for line in lines:
        title, text = (line.get("title") or "").strip(), (line.get("text") or "").strip()
        if line.get("type") == "dialog":
            out.append(f"{title}: {text}")
            continue
        if title and title != NULL_TITLE:
            out.append(title)
        if text:
            out.append(text)
    return "\n".join(out)


def _forms(character: Character) -> list[str]:
    return [f for f in dict.fromkeys([character.name, *character.aliases]) if f.strip()]


def mask_scene(scene: Scene, mains: list[Character]) -> tuple[list[dict[str, str]], dict[str, str]]:
    """A scene in clear masked like a testing scene: (lines, character name -> code).

    A scene masked already is returned as it is, with its ``char_map``.
    """
    if scene.char_map:
        return scene.lines, dict(scene.char_map)
    by_form = {form.casefold(): c.name for c in mains for form in _forms(c)}
    pattern = re.compile(
        r"(?<!\w)(?:"
        + "|".join(re.escape(f) for f in sorted(by_form, key=len, reverse=True))
        + r")(?!\w)",
        re.IGNORECASE,
    )
    codes: dict[str, str] = {}

    def code_for(name: str) -> str:
        return codes.setdefault(name, f"P{len(codes)}")

    for line in scene.lines:
        title = (line.get("title") or "").strip()
        if line.get("type") == "dialog" and title.casefold() in by_form:
            code_for(by_form[title.casefold()])
        for text in (title, line.get("text") or ""):
            for match in pattern.finditer(text):
                code_for(by_form[match.group(0).casefold()])
    if not codes:
        return scene.lines, {}
    mapping = {form: codes[name] for form, name in by_form.items() if name in codes}
    masked = []
    for line in scene.lines:
        title = line.get("title") or ""
        if line.get("type") == "dialog" and title.strip().casefold() in mapping:
            title = mapping[title.strip().casefold()]
        else:
            title = display_text(title, mapping, keep_case=False)
        masked.append(
            {
                **line,
                "title": title,
                "text": display_text(line.get("text") or "", mapping, keep_case=False),
            }
        )
    return masked, codes


def unmask_scene(scene: Scene) -> tuple[list[dict[str, str]], list[str]]:
    """A masked scene with its codes back to names: (lines, names of the masked).

    A scene in clear is returned as it is, with the names that speak in it.
    """
    if not scene.char_map:
        return scene.lines, list(scene.char_counts)
    name_of = {code.upper(): name.title() for name, code in scene.char_map.items()}

    def names(text: str) -> str:
        return _CODE_WORD_RE.sub(lambda m: name_of.get(m.group(0).upper(), m.group(0)), text)

    lines = [
        {**line, "title": names(line.get("title") or ""), "text": names(line.get("text") or "")}
        for line in scene.lines
    ]
    return lines, list(scene.char_map)


@dataclass
class WorkView:
    """How a run shows one work to the model: its main characters, names and title."""

    work: Work
    characters: list[Character]
    perturb: bool = False
    seed: int = 0
    redact_title: bool = True
    name_map: dict[str, str] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        if self.perturb:
            self.name_map = build_name_map(
                characters=self.characters, seed=self.seed, work_key=self.work.key
            )

    @property
    def mains(self) -> list[Character]:
        return [c for c in self.characters if c.is_main]

    def character(self, name: str) -> Character | None:
        folded = name.casefold()
        return next((c for c in self.characters if c.name.casefold() == folded), None)

    @property
    def kind(self) -> str:
        return "TV show" if self.work.kind == Work.Kind.TV_SHOW else "movie"

    @property
    def titles(self) -> list[str]:
        return [self.work.title, self.work.key]

    def name(self, name: str) -> str:
        """A character's name as shown (perturbed, else capitalised as a name)."""
        if self.name_map:
            shown = display_name(name, self.name_map)
            if shown != name:
                return shown
        return name.title() if name.islower() else name

    def aliases(self, name: str) -> list[str]:
        """Other spellings the model may answer with (only in clear: a perturbed run
        shows one name per character)."""
        if self.name_map:
            return []
        character = self.character(name)
        return list(character.aliases) if character else []

    def text(self, text: str) -> str:
        """Any text the model reads about this work: names mapped, title withheld."""
        if self.name_map:
            text = display_text(text, self.name_map)
        if self.redact_title:
            text = redact_titles(text, self.titles)
        return text

    def scene_text(self, lines: list[dict[str, str]]) -> str:
        return self.text(render_lines(lines))
