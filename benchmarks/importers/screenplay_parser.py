"""Parse a raw screenplay (IMSDb-style plain text or Fountain) into scenes.

Pure Python, no Django: :func:`parse_screenplay` turns the bytes of one script into
a :class:`Screenplay` (title, scenes of actions and utterances, and a record of what
was repaired, dropped or could not be parsed); :func:`characters` merges cue
variants into characters and ranks them; :class:`NameMasker` finds and masks the
main characters' names the way ToM-in-AMC does.

Plain-text scrapes carry their structure in indentation (cues centred, dialogue
indented less, action flush with the scene headings), so when a script is indented
the parser reads its layout from the script itself; Fountain files and flat scrapes
carry it in blank lines and capitals, as the Fountain syntax describes
(https://fountain.io/syntax). Scene boundaries are INT./EXT. headings only, as in the
paper: "the texts between two headings are considered as one scene".
"""

from __future__ import annotations

import html
import itertools
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from common.gc_pause import gc_paused

# -- results -----------------------------------------------------------------------


class ScreenplayError(Exception):
    """The script cannot be used at all (empty, binary, no scene headings, no cues)."""

    def __init__(self, message: str, *, line: int | None = None) -> None:
        self.message = message
        self.line = line
        super().__init__(message)


@dataclass(slots=True)
class Action:
    text: str
    line: int


@dataclass(slots=True)
class Utterance:
    cue: str  # as written, extensions stripped: "MR. NOLAN"
    line: int
    parts: list[tuple[str, str]] = field(default_factory=list)  # ("paren"|"speech", text)


@dataclass
class ParsedScene:
    heading: str  # "" for the part before the first heading
    line: int
    items: list[Action | Utterance] = field(default_factory=list)


@dataclass
class Screenplay:
    title: str
    encoding: str
    scenes: list[ParsedScene]
    # Problems worth a warning: what was repaired or guessed, "kind" -> [(line, text)].
    repaired: dict[str, list[tuple[int, str]]]
    unparsed: list[tuple[int, str, str]]  # (line, text, why)
    dropped: Counter  # page furniture, transitions, title page lines, by kind
    line_endings: Counter  # "CRLF" / "LF" / "CR" -> count
    layout: str  # "fountain", "indented" or "flat"


# -- patterns ------------------------------------------------------------------------

_HEADING_RE = re.compile(
    r"""^(?:(?P<num>\d+[A-Z]?)[.):]?\s+)?          # shooting-script scene number
    (?P<prefix>(?:INT|EXT)\.?\s*/\s*(?:INT|EXT)\.?|I\s*/\s*E\.?|E\s*/\s*I\.?
      |INT\.?|EXT\.?|EST\.?|INTERIOR|EXTERIOR)
    (?=[\s.\-\u2013\u2014:]|$)""",
    re.VERBOSE,
)
_TRAILING_NUMBER_RE = re.compile(r"\s+\*?(?P<num>\d+[A-Z]?)\.?\*?$")
_FOUNTAIN_SCENE_NUMBER_RE = re.compile(r"\s*#[\w.\-]+#\s*$")
_TRANSITION_RE = re.compile(
    r"^(?:[A-Z][A-Z .'\u2019\-]*\bTO:"
    r"|(?:FADE|IRIS|WIPE)\s+(?:IN|OUT|TO BLACK|TO WHITE)\b[A-Z .\-]*[:.]?"
    r"|(?:CUT|DISSOLVE|SMASH CUT|MATCH CUT|JUMP CUT|TIME CUT|INTERCUT)\b[A-Z .'\u2019\-]*[:.]?"
    r"|BACK TO SCENE[:.]?|FREEZE FRAME[:.]?)$"
)
_MONTHS = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
_FURNITURE = {
    "continued": re.compile(
        r"^\(?\s*(?:\d+[A-Z]?\s+)?(?:CONTINUED|CONT'D|CONT\u2019D|CONT\.|CONTINUING)\s*:?"
        r"\s*(?:\(\d+\))?\s*\)?\s*(?:\d+[A-Z]?\.?)?$",
        re.IGNORECASE,
    ),
    "(MORE)": re.compile(r"^\(\s*MORE\s*\)$", re.IGNORECASE),
    "page number": re.compile(r"^(?:-\s*)?(?:page|pg\.?)?\s*\d{1,3}[A-Z]?\s*[.)]?(?:\s*-)?$", re.I),
    "draft header": re.compile(
        r"^[\W_]*(?:(?:final|revised|shooting|production|first|second|third|fourth|fifth"
        r"|rewrite|rehearsal|white|blue|pink|yellow|green|goldenrod|buff|salmon|cherry|tan)"
        r"\s+)+(?:draft|script|revisions?|pages)\b[\s\d/.,:;()\-\u2013\u2014]*(?:"
        + _MONTHS
        + r"[\s\d/.,]*)?$",
        re.IGNORECASE,
    ),
    "THE END": re.compile(r"^(?:THE END|END)\.?$"),
    "separator": re.compile(r"^[\s*\-=_~#.]{3,}$"),
}
_IMSDB_FOOTER_RE = re.compile(r"^\s*Writers\s*:", re.IGNORECASE)
_HTML_TAG_RE = re.compile(r"</?[A-Za-z][A-Za-z0-9]*(?:\s[^<>]*)?/?>")
_HTML_ENTITY_RE = re.compile(r"&(?:[A-Za-z]{2,8}|#\d{2,6}|#x[0-9A-Fa-f]{2,5});")
# UTF-8 bytes read as cp1252 ("Â°", "â€™", "Ã©"): a lead byte and 1-3 continuation bytes.
_CP1252_CONT = "\u0080-\u00bf\u0152\u0153\u0160\u0161\u0178\u017d\u017e\u0192\u02c6\u02dc\u2013\u2014\u2018-\u201e\u2020-\u2022\u2026\u2030\u2039\u203a\u20ac\u2122"  # noqa: E501
_MOJIBAKE_RE = re.compile(f"[\u00c2-\u00f4][{_CP1252_CONT}]{{1,3}}")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u200b-\u200f\ufeff]")
_CUE_EXTENSION_RE = re.compile(r"\s*\([^()]*\)\s*$")
_CUE_CONTD_RE = re.compile(r"\s+(?:CONT'D|CONT\u2019D|CONTD|CONT\.|CONTINUED|CONT)\s*$", re.I)
_CONTD_RE = re.compile(r"\bCONT(?:'D|\u2019D|D|\.|INUED|INUING)?(?![A-Z])", re.I)
_CUE_TEXT_RE = re.compile(r"[^\W_][\w .'\u2019&/#\-,]*")  # capitals: checked apart
# A title page line that quotes the title: "PULP FICTION" -- by ...
_QUOTED_TITLE_RE = re.compile(r'^["\u201c]([^"\u201c\u201d]+)["\u201d](?=\s|$|[-,:\u2013\u2014])')
# A byline after the title: '-- by A & B', ', written by A', 'screenplay by A'.
_BYLINE_RE = re.compile(
    r"(?:\s*(?:--?|[\u2013\u2014,:])\s*(?:(?:an?\s+)?(?:original\s+)?"
    r"(?:screenplay|story|script|teleplay|screen\s*play)\s+)?(?:written\s+)?by\s+"
    r"|\s+(?:(?:original\s+)?(?:screenplay|story|script|teleplay)|written)\s+by\s+).*$",
    re.IGNORECASE,
)
_TITLE_SUFFIX_RE = re.compile(
    r"[\s:\-\u2013\u2014,]*\b(?:(?:final|revised|shooting|first|second|third|fourth|production)\s+)*"
    r"(?:draft|script|screenplay)\b.*$",
    re.IGNORECASE,
)
_FOUNTAIN_EMPHASIS = (
    re.compile(r"\*{1,3}(?=\S)(.+?)(?<=\S)\*{1,3}"),
    re.compile(r"(?<!\w)_(?=\S)(.+?)(?<=\S)_(?!\w)"),
)


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Words that make a cue a group ("BOTH", "LUKE AND HAN"), never one main character.
GROUP_WORDS = _words(
    "BOTH ALL EVERYONE EVERYBODY TOGETHER CROWD VOICES OTHERS GROUP CHORUS VARIOUS"
)
# "YOUNG EDWARD" is Edward; "MR. NOLAN" is Nolan.
AGE_WORDS = _words("YOUNG YOUNGER OLD OLDER ADULT LITTLE TEEN TEENAGE TEENAGED BABY ELDERLY AGED")
TITLE_WORDS = _words(
    """MR MRS MS MISS DR PROF PROFESSOR UNCLE AUNT AUNTIE SIR LADY LORD CAPTAIN CAPT SGT
    SERGEANT LT LIEUTENANT GENERAL GEN COLONEL COL FATHER SISTER BROTHER MASTER PRINCESS
    PRINCE KING QUEEN AGENT DETECTIVE OFFICER COMMANDER ADMIRAL MAJOR CHIEF SENATOR"""
)
_ORDINALS = _words("FIRST SECOND THIRD FOURTH FIFTH 1ST 2ND 3RD 4TH 5TH")


# -- decoding and cleaning -------------------------------------------------------------


def decode(data: bytes) -> tuple[str, str, int | None]:
    """Text, encoding and the line of the first byte UTF-8 could not read (or None)."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16"), "utf-16", None
    if b"\x00" in data:
        line = data.count(b"\n", 0, data.index(b"\x00")) + 1
        raise ScreenplayError("binary data (NUL bytes), not a text screenplay", line=line)
    try:
        return data.decode("utf-8-sig"), "utf-8", None
    except UnicodeDecodeError as exc:
        bad_line = data.count(b"\n", 0, exc.start) + 1
    try:
        return data.decode("cp1252"), "cp1252", bad_line
    except UnicodeDecodeError:
        return data.decode("latin-1"), "latin-1", bad_line


def _repair_mojibake(text: str) -> str:
    def fix(match: re.Match[str]) -> str:
        chunk = match.group()
        try:
            return chunk.encode("cp1252").decode("utf-8")
        except UnicodeError:
            return chunk

    # A no-break space (C2 A0) whose A0 was later turned into a plain space: "WILLÂ ".
    return re.sub(r"(?<=\w)\u00c2(?=\s|$)", "", _MOJIBAKE_RE.sub(fix, text))


def _split_lines(text: str) -> tuple[list[str], Counter]:
    endings = Counter({"CRLF": text.count("\r\n"), "CR": len(re.findall(r"\r(?!\n)", text))})
    endings["LF"] = text.count("\n") - endings["CRLF"]
    # Not str.splitlines: it also breaks at form feeds and other separators, which
    # would make our line numbers disagree with an editor's.
    return re.split(r"\r\n|\r|\n", text), +endings


# -- the parser ------------------------------------------------------------------------


@dataclass(slots=True)
class _Line:
    number: int
    text: str  # stripped
    indent: int


def heading_text(text: str, *, fountain: bool = False) -> str | None:
    """The scene heading in ``text`` without scene numbers, or None if it is not one."""
    s = text.strip()
    if fountain and s.startswith(".") and not s.startswith("..") and len(s) > 1:
        return _FOUNTAIN_SCENE_NUMBER_RE.sub("", s[1:]).strip()
    candidate = s.upper() if fountain else s
    match = _HEADING_RE.match(candidate)
    if not match:
        return None
    if fountain:
        s = _FOUNTAIN_SCENE_NUMBER_RE.sub("", s)
    elif s != s.upper() and sum(c.islower() for c in s) > len(s) // 3:
        return None  # "Int. is short for interior." — prose, not a heading
    if match.group("num"):
        s = s[match.start("prefix") :]
        trailing = _TRAILING_NUMBER_RE.search(s)
        if trailing and trailing.group("num") == match.group("num"):
            s = s[: trailing.start()]
    return re.sub(r"\s+", " ", s).strip()


def cue_text(text: str) -> str | None:
    """The character name of a cue line ("EDWARD (V.O.)(CONT'D)" -> "EDWARD") or None."""
    s = text.strip().rstrip("^").strip()
    if s.startswith("@"):
        s = s[1:].strip()
    while True:
        stripped = _CUE_EXTENSION_RE.sub("", s)
        if stripped == s:
            break
        s = stripped
    s = _CUE_CONTD_RE.sub("", s).strip()
    s = re.sub(r"\s+", " ", s)
    if not s or len(s) > 40 or len(s.split()) > 5 or not re.search(r"[A-Za-z]", s):
        return None
    capitals = re.sub(r"\bMc(?=[A-Z])", "MC", s)  # "McCLANE"
    if capitals != capitals.upper() or not _CUE_TEXT_RE.fullmatch(capitals):
        return None
    if s.endswith((".", ",", "-")) or _HEADING_RE.match(s) or is_transition(s):
        return None
    if furniture_kind(s):
        return None
    return s


def is_transition(text: str) -> bool:
    s = text.strip()
    return bool(s) and s == s.upper() and bool(_TRANSITION_RE.match(s))


def furniture_kind(text: str) -> str | None:
    s = text.strip()
    for kind, pattern in _FURNITURE.items():
        if pattern.match(s):
            return kind
    return None


def name_key(name: str) -> str:
    """Compare cue spellings: "Mr. Nolan", "MR NOLAN" and "MR.  NOLAN" are one key."""
    return re.sub(r"\s+", " ", name.upper().replace("\u2019", "'").replace(".", " ")).strip()


class _Builder:
    """Collects scenes from classified lines; everything before a heading is a prologue."""

    def __init__(self) -> None:
        self.scenes: list[ParsedScene] = [ParsedScene(heading="", line=0)]
        self.speech: Utterance | None = None
        self.action: Action | None = None
        self.paren_open = False

    @property
    def scene(self) -> ParsedScene:
        return self.scenes[-1]

    def heading(self, text: str, line: int) -> None:
        self.close()
        self.scenes.append(ParsedScene(heading=text, line=line))

    def close(self) -> None:
        self.speech = None
        self.action = None
        self.paren_open = False

    def add_action(self, text: str, line: int) -> None:
        self.speech = None
        if self.action is None:
            self.action = Action(text=text, line=line)
            self.scene.items.append(self.action)
        else:
            self.action.text += " " + text

    def end_paragraph(self) -> None:
        self.action = None

    def cue(self, name: str, line: int, *, text: str = "") -> None:
        self.action = None
        last = self.scene.items[-1] if self.scene.items else None
        # A speech split by a page break comes back as "NEIL (CONT'D)" right after
        # NEIL's first half: one utterance, not two.
        if (
            isinstance(last, Utterance)
            and name_key(last.cue) == name_key(name)
            and _CONTD_RE.search(text)
        ):
            self.speech = last
        else:
            self.speech = Utterance(cue=name, line=line)
            self.scene.items.append(self.speech)
        self.paren_open = False

    def dialogue(self, text: str) -> None:
        assert self.speech is not None
        parts = self.speech.parts
        if self.paren_open:
            parts[-1] = ("paren", parts[-1][1] + " " + text)
        elif text.startswith("("):
            close = text.find(")")
            if 0 < close < len(text) - 1:
                # "(beat) Then we go." — the direction, then speech on the same line.
                parts.append(("paren", text[: close + 1]))
                self.paren_open = False
                self.dialogue(text[close + 1 :].strip())
                return
            parts.append(("paren", text))
        elif parts and parts[-1][0] == "speech":
            parts[-1] = ("speech", parts[-1][1] + " " + text)
        else:
            parts.append(("speech", text))
        kind, last = parts[-1]
        self.paren_open = kind == "paren" and last.count("(") > last.count(")")


@gc_paused()
def parse_screenplay(data: bytes, *, fountain: bool = False) -> Screenplay:
    """Parse one script. Raises :class:`ScreenplayError` if there is nothing to use."""
    if not data.strip():
        raise ScreenplayError("the file is empty")
    text, encoding, bad_line = decode(data)
    raw_lines, endings = _split_lines(text)
    repaired: dict[str, list[tuple[int, str]]] = {}
    if bad_line is not None:
        repaired[f"not valid UTF-8, read as {encoding}"] = [(bad_line, "")]
    dropped: Counter = Counter()
    unparsed: list[tuple[int, str, str]] = []

    residue = _leading_residue(raw_lines)
    if residue:
        repaired[RESIDUE_REMOVED] = [(n + 1, raw_lines[n].strip()) for n in residue]
        for n in residue:
            raw_lines[n] = ""
    if fountain or _looks_like_fountain(raw_lines):
        fountain = True
        raw_lines = _strip_fountain_comments(raw_lines)
    lines: list[_Line | None] = []  # None: a blank line
    for number, raw in enumerate(raw_lines, start=1):
        cleaned = _clean(raw, number, repaired, fountain=fountain)
        if not cleaned.strip():
            lines.append(None)
            continue
        stripped = cleaned.strip()
        lines.append(_Line(number, stripped, len(cleaned) - len(cleaned.lstrip())))

    title, lines = _take_title(lines, fountain=fountain, dropped=dropped)
    lines = _drop_footer(lines, dropped)
    if fountain:
        layout = "fountain"
        builder = _parse_blank_separated(lines, fountain=True, dropped=dropped, unparsed=unparsed)
    else:
        indents = _indented_layout(lines)
        if indents is None:
            layout = "flat"
            builder = _parse_blank_separated(
                lines, fountain=False, dropped=dropped, unparsed=unparsed
            )
        else:
            layout = "indented"
            builder = _parse_indented(
                lines, indents, dropped=dropped, unparsed=unparsed, repaired=repaired
            )

    scenes = builder.scenes
    if len(scenes) == 1:
        raise ScreenplayError(
            "no scene headings (INT. / EXT. / INT./EXT. / I/E lines) found; is this a screenplay?"
        )
    prologue = scenes[0]
    if not any(isinstance(item, Utterance) for item in prologue.items):
        # A title page, an opening crawl: not a scene, and nobody speaks in it.
        scenes = scenes[1:]
        if prologue.items:
            dropped["before the first scene heading"] += len(prologue.items)
    else:
        prologue.line = prologue.items[0].line
    for scene in scenes:
        for item in scene.items:
            if isinstance(item, Utterance) and not item.parts:
                unparsed.append((item.line, item.cue, "character cue without dialogue"))
        scene.items = [i for i in scene.items if not (isinstance(i, Utterance) and not i.parts)]
    if not any(isinstance(i, Utterance) for s in scenes for i in s.items):
        raise ScreenplayError("no character cues with dialogue found")
    unparsed.sort()
    return Screenplay(
        title=title,
        encoding=encoding,
        scenes=scenes,
        repaired=repaired,
        unparsed=unparsed,
        dropped=dropped,
        line_endings=endings,
        layout=layout,
    )


RESIDUE_REMOVED = "HTML/JavaScript residue before the script removed"
# What a scraped web page leaves above the title page once its tags are stripped:
# comment markers, a frame-busting script ("if (window!= top)" /
# "top.location.href=location.href"), script tags the tag pattern does not take.
_RESIDUE_RE = re.compile(
    r"""^(?:<!--.*|.*-->|//.*|<!\w.*|</?\s*script\b.*
      |if\s*\(\s*!?\s*(?:window|self|top|parent|document)\b.*
      |(?:window|self|top|parent|document|location)\.[\w.]+\s*(?:=|\().*
      |[{}();]+)$""",
    re.VERBOSE | re.IGNORECASE,
)


def _leading_residue(raw_lines: list[str]) -> list[int]:
    """Indexes of the HTML/JavaScript lines above the title page (before any text).

    Only the start of the file is looked at: from the first line that is neither
    residue nor blank on, the script is the script (its own HTML residue is cleaned
    line by line, and reported, by :func:`_clean`). Lines inside an HTML comment
    opened there are residue whatever they say.
    """
    found: list[int] = []
    in_comment = False
    for index, raw in enumerate(raw_lines):
        had_tags = "<" in raw
        text = _HTML_TAG_RE.sub("", raw).strip() if had_tags else raw.strip()
        if in_comment or (text and _RESIDUE_RE.match(text)) or (had_tags and not text):
            found.append(index)
            if "<!--" in text:
                in_comment = True
            if "-->" in text:
                in_comment = False
            continue
        if text:
            break
    return found


def _looks_like_fountain(lines: list[str]) -> bool:
    first = next((line for line in lines if line.strip()), "")
    return bool(re.match(r"^title\s*:", first, re.IGNORECASE))


def _strip_fountain_comments(lines: list[str]) -> list[str]:
    """Remove /* boneyard */ and [[notes]], keeping the line count (and numbers) intact."""
    text = "\n".join(lines)

    def blank(match: re.Match[str]) -> str:
        return "\n" * match.group().count("\n")

    text = re.sub(r"/\*.*?\*/", blank, text, flags=re.DOTALL)
    text = re.sub(r"\[\[.*?\]\]", blank, text, flags=re.DOTALL)
    return text.split("\n")


def _clean(
    raw: str, number: int, repaired: dict[str, list[tuple[int, str]]], *, fountain: bool
) -> str:
    line = raw
    if "<" in line or "&" in line:
        without_tags = _HTML_TAG_RE.sub("", line)
        unescaped = (
            html.unescape(without_tags) if _HTML_ENTITY_RE.search(without_tags) else without_tags
        )
        if unescaped != line:
            repaired.setdefault("HTML residue removed", []).append((number, raw.strip()))
            line = unescaped
    if "\u00c2" in line or _MOJIBAKE_RE.search(line):
        fixed = _repair_mojibake(line)
        if fixed != line:
            repaired.setdefault("mis-decoded characters repaired", []).append((number, raw.strip()))
            line = fixed
    line = _CONTROL_RE.sub("", line.replace("\u00a0", " ")).expandtabs(8).rstrip()
    if fountain:
        for pattern in _FOUNTAIN_EMPHASIS:
            line = pattern.sub(r"\1", line)
        line = line.replace("\\*", "*").replace("\\_", "_")
    else:
        # Revision marks: asterisks in the right margin of changed lines.
        line = re.sub(r"(?<=\S)\s+\*+$", "", line)
    return line


def _take_title(
    lines: list[_Line | None], *, fountain: bool, dropped: Counter
) -> tuple[str, list[_Line | None]]:
    """The title (title page, IMSDb footer or first line) and the lines without a title page."""
    first = next((i for i, line in enumerate(lines) if line is not None), None)
    if first is None:
        return "", lines
    if fountain and re.match(r"^[A-Za-z][A-Za-z ]*:", lines[first].text):
        # Fountain title page: "key: value" lines (values may continue indented) up
        # to the first blank line.
        end = first
        while end < len(lines) and lines[end] is not None:
            end += 1
        fields: dict[str, str] = {}
        key = ""
        for line in lines[first:end]:
            match = re.match(r"^([A-Za-z][A-Za-z ]*):\s*(.*)$", line.text)
            if match and line.indent == 0:
                key = match.group(1).strip().lower()
                fields[key] = match.group(2).strip()
            elif key:
                fields[key] = (fields[key] + " " + line.text).strip()
        dropped["title page"] += end - first
        return _clean_title(fields.get("title", ""), lines), [None] * end + lines[end:]
    # IMSDb appends "<title> / Writers : ... / Genres : ... / User Comments".
    for index in range(len(lines) - 1, max(first, len(lines) - 40), -1):
        line = lines[index]
        if line is not None and _IMSDB_FOOTER_RE.match(line.text):
            previous = next((lines[j] for j in range(index - 1, first, -1) if lines[j]), None)
            if previous is not None:
                return _clean_title(previous.text, lines), lines
    title = ""
    for line in lines[first:]:
        if line is None:
            continue
        if heading_text(line.text, fountain=fountain) is not None:
            break
        candidate = _clean_title(line.text, lines)
        if candidate and _plausible_title(line.text):
            title = candidate
            break
    return title, lines


def _plausible_title(text: str) -> bool:
    """A title page line can be a title: words, not markup, furniture or a transition."""
    return (
        bool(re.search(r"[A-Za-z]{2}", text))
        and not re.search(r"[<>{}=;]|//", text)
        and not furniture_kind(text)
        and not is_transition(text)
    )


def _clean_title(text: str, lines: list[_Line | None]) -> str:
    """A title line without quotes, byline or draft label, in the case the script uses.

    ``"PULP FICTION" -- by Quentin Tarantino & Roger Avary`` -> ``Pulp Fiction``: a
    quoted title is what is inside the quotes; a byline goes from a separator or a
    "written by"/"screenplay by" to the end ("Stand by Me" keeps its "by"). A title in
    capitals takes the spelling it has elsewhere in the file (an IMSDb footer, the
    narration), else each word capitalised.
    """
    text = text.strip()
    quoted = _QUOTED_TITLE_RE.match(text)
    if quoted:
        text = quoted.group(1)
    text = _BYLINE_RE.sub("", text)
    # "ALIEN by Dan O'Bannon": a title in capitals, then "by" and a name written in
    # lower case letters too, is a byline ("STAND BY ME" is not).
    text = re.sub(r"^([^a-z]*[A-Z][^a-z]*?)\s+by\s+(?=\S*[a-z]).*$", r"\1", text)
    title = _TITLE_SUFFIX_RE.sub("", text).strip(" :-\u2013\u2014,\"'\u201c\u201d")
    title = re.sub(r"\s+", " ", title or text.strip(" \"'\u201c\u201d"))
    if title == title.upper():
        title = _spelling_elsewhere(title, lines) or " ".join(
            w.capitalize() for w in title.lower().split()
        )
    return title


def _spelling_elsewhere(title: str, lines: list[_Line | None]) -> str | None:
    """The most frequent mixed-case spelling of ``title`` in the file, if any."""
    if not re.search(r"[A-Z]", title):
        return None
    pattern = re.compile(
        r"(?<!\w)" + r"\s+".join(map(re.escape, title.split())) + r"(?!\w)", re.IGNORECASE
    )
    spellings: Counter = Counter()
    for line in lines:
        if line is None:
            continue
        for match in pattern.finditer(line.text):
            found = re.sub(r"\s+", " ", match.group())
            if found != found.upper() and found != found.lower():
                spellings[found] += 1
    return spellings.most_common(1)[0][0] if spellings else None


def _drop_footer(lines: list[_Line | None], dropped: Counter) -> list[_Line | None]:
    for index in range(len(lines) - 1, max(-1, len(lines) - 40), -1):
        line = lines[index]
        if line is not None and _IMSDB_FOOTER_RE.match(line.text):
            start = index - 1
            while start > 0 and lines[start] is None:
                start -= 1
            dropped["IMSDb footer"] += sum(1 for x in lines[start:] if x is not None)
            return lines[:start]
    return lines


@dataclass
class _Indents:
    action_max: int  # lines indented up to this are action, headings, transitions
    cue_min: int  # indented lines from this on that look like cues are cues

    def is_dialogue(self, indent: int) -> bool:
        return self.action_max < indent < self.cue_min


def _indented_layout(lines: list[_Line | None]) -> _Indents | None:
    """Read the indentation of cues, dialogue and action; None for a flat script."""
    # Where the INT./EXT. starts, after any scene number in the margin.
    heading_indents = Counter(
        line.indent + match.start("prefix")
        for line in lines
        if line is not None and (match := _HEADING_RE.match(line.text)) and heading_text(line.text)
    )
    if not heading_indents:
        return None
    action = heading_indents.most_common(1)[0][0]
    cue_indents: Counter = Counter()
    dialogue_indents: Counter = Counter()
    for line, after in itertools.pairwise(lines):
        if line is None or after is None or line.indent < action + 5:
            continue
        if cue_text(line.text) and after.indent < line.indent - 2 and after.indent > action + 2:
            cue_indents[line.indent] += 1
            dialogue_indents[after.indent] += 1
    if sum(cue_indents.values()) < 3:
        return None
    cue = cue_indents.most_common(1)[0][0]
    dialogue = dialogue_indents.most_common(1)[0][0]
    return _Indents(action_max=(action + dialogue) // 2, cue_min=(dialogue + cue + 1) // 2)


def _parse_indented(
    lines: list[_Line | None],
    indents: _Indents,
    *,
    dropped: Counter,
    unparsed: list[tuple[int, str, str]],
    repaired: dict[str, list[tuple[int, str]]],
) -> _Builder:
    """IMSDb-style text: a line's role comes from its indentation and its capitals.

    Scrapes lose indentation here and there; three slips are read back (and reported):
    a cue typed flush left above indented dialogue, a cue not in capitals where
    cues stand ("Keating"), and dialogue typed flush left right under its cue.
    """
    known = {
        name_key(name)
        for line in lines
        if line is not None
        and line.indent >= indents.cue_min
        and (name := cue_text(line.text)) is not None
    }
    out = _Builder()
    next_lines = _next_lines(lines)
    flush_dialogue = False  # dialogue that lost its indentation, until a blank line
    skip = -1
    for index, line in enumerate(lines):
        if line is None:
            out.end_paragraph()
            flush_dialogue = False
            continue
        if index == skip:
            continue
        text = line.text
        heading = heading_text(text)
        if heading is not None:
            more = _heading_continuation(lines, index)
            if more is not None:
                heading, skip = f"{heading} {more.text}", index + 1
            out.heading(heading, line.number)
            flush_dialogue = False
            continue
        if is_transition(text):
            dropped["transition"] += 1
            out.end_paragraph()
            continue
        kind = furniture_kind(text)
        if kind:
            dropped[kind] += 1
            continue
        adjacent = lines[index + 1] if index + 1 < len(lines) else None
        if line.indent <= indents.action_max:
            if flush_dialogue and out.speech is not None:
                out.dialogue(text)
                continue
            name = cue_text(text)
            if name and adjacent is not None and indents.is_dialogue(adjacent.indent):
                repaired.setdefault("character cue not indented", []).append((line.number, text))
                out.cue(name, line.number, text=text)
                continue
            out.add_action(text, line.number)
            continue
        flush_dialogue = False
        if line.indent >= indents.cue_min:
            name = cue_text(text)
            if name is None and name_key(text) in known and len(text) <= 40:
                name = text
                repaired.setdefault("character cue not in capitals", []).append((line.number, text))
            if name is not None:
                following = next_lines[index]
                if adjacent is not None and adjacent.indent <= indents.action_max:
                    # Right under the cue, flush left: dialogue that lost its indent.
                    repaired.setdefault("dialogue not indented", []).append(
                        (adjacent.number, adjacent.text)
                    )
                    out.cue(name, line.number, text=text)
                    flush_dialogue = True
                    continue
                if following is not None and (
                    indents.is_dialogue(following.indent)
                    or (following.text.startswith("(") and following.indent > indents.action_max)
                ):
                    out.cue(name, line.number, text=text)
                    continue
        if out.speech is not None:
            out.dialogue(text)
        elif len(out.scenes) > 1:
            unparsed.append((line.number, text, "indented like dialogue but no character cue"))
            out.add_action(text, line.number)
        else:
            out.add_action(text, line.number)  # title page; dropped with the prologue
    return out


def _heading_continuation(lines: list[_Line | None], index: int) -> _Line | None:
    """A heading too long for its line goes on, in capitals, right under it."""
    line, after = lines[index], lines[index + 1] if index + 1 < len(lines) else None
    if (
        line is None
        or after is None
        or abs(after.indent - line.indent) > 2
        or after.text != after.text.upper()
        or not re.search(r"[A-Z]", after.text)
        or len(after.text) > 60
        or heading_text(after.text) is not None
        or is_transition(after.text)
        or furniture_kind(after.text)
    ):
        return None
    return after


def _next_lines(lines: list[_Line | None]) -> list[_Line | None]:
    """For each index, the next non-blank line after it (or None), in one backward pass.

    Looking ahead by scanning (or slicing) the rest of the list at every cue made the
    parse quadratic: 20 MB took minutes. This keeps it linear.
    """
    following: list[_Line | None] = [None] * len(lines)
    upcoming: _Line | None = None
    for index in range(len(lines) - 1, -1, -1):
        following[index] = upcoming
        if lines[index] is not None:
            upcoming = lines[index]
    return following


def _parse_blank_separated(
    lines: list[_Line | None],
    *,
    fountain: bool,
    dropped: Counter,
    unparsed: list[tuple[int, str, str]],
) -> _Builder:
    """Fountain and flat text: blank lines and capitals carry the structure."""
    out = _Builder()
    in_dialogue = False
    skip = -1
    for index, line in enumerate(lines):
        if line is None:
            out.end_paragraph()
            if in_dialogue:
                out.speech = None
            in_dialogue = False
            continue
        text = line.text
        before_blank = index == 0 or lines[index - 1] is None
        after = lines[index + 1] if index + 1 < len(lines) else None
        if in_dialogue:
            if fountain and text.startswith("~"):
                text = text[1:].strip()
            out.dialogue(text)
            continue
        if fountain:
            if re.match(r"^={3,}\s*$", text):
                dropped["page break"] += 1
                continue
            if text.startswith(("#", "=")):
                dropped["section or synopsis"] += 1
                continue
            if text.startswith("!"):
                out.add_action(text[1:].strip(), line.number)
                continue
            if text.startswith(">") and text.endswith("<"):
                centred = text[1:-1].strip()
                if furniture_kind(centred):
                    dropped[furniture_kind(centred)] += 1
                elif centred:
                    out.add_action(centred, line.number)
                continue
            if text.startswith(">"):
                dropped["transition"] += 1
                continue
            if text.startswith("@") and after is not None:
                name = cue_text(text)
                if name:
                    out.cue(name, line.number, text=text)
                    in_dialogue = True
                    continue
        if index == skip:
            continue
        if before_blank:
            heading = heading_text(text, fountain=fountain)
            if heading is not None:
                more = None if fountain else _heading_continuation(lines, index)
                if more is not None:
                    heading, skip = f"{heading} {more.text}", index + 1
                out.heading(heading, line.number)
                continue
        if is_transition(text):
            dropped["transition"] += 1
            continue
        kind = furniture_kind(text)
        if kind:
            dropped[kind] += 1
            continue
        if before_blank and after is not None:
            name = cue_text(text)
            if name is not None:
                out.cue(name, line.number, text=text)
                in_dialogue = True
                continue
        if text.startswith("(") and out.action is None:
            unparsed.append((line.number, text, "parenthetical outside dialogue"))
        out.add_action(text.lstrip("~").strip() if fountain else text, line.number)
    return out


# -- characters --------------------------------------------------------------------------


@dataclass
class CharacterInfo:
    key: str  # name_key of the canonical spelling
    name: str  # the most frequent spelling, as written: "MR. NOLAN"
    count: int  # utterances
    first: int  # index of the first utterance in the script
    variants: list[str]  # every spelling as written, most frequent first
    group: bool  # "BOTH", "LUKE AND HAN": never a main character


def characters(scenes: Iterable[ParsedScene]) -> tuple[list[CharacterInfo], dict[str, str]]:
    """All speakers, with cue variants merged; and cue key -> canonical key.

    Variants merged into the more frequent spelling: an age or title word in front
    ("YOUNG EDWARD", "MR. KEATING"), a surname after a given name ("LUKE SKYWALKER").
    Sorted by utterances (ties: first to speak first).
    """
    counts: Counter = Counter()
    spellings: dict[str, Counter] = {}
    first: dict[str, int] = {}
    position = 0
    for scene in scenes:
        for item in scene.items:
            if isinstance(item, Utterance):
                key = name_key(item.cue)
                counts[key] += 1
                spellings.setdefault(key, Counter())[re.sub(r"\s+", " ", item.cue)] += 1
                first.setdefault(key, position)
                position += 1
    parent = {key: key for key in counts}

    def root(key: str) -> str:
        while parent[key] != key:
            key = parent[key]
        return key

    def rank(key: str) -> tuple[int, int]:
        return (-counts[key], first[key])

    for key in sorted(counts, key=rank):
        if is_group(key):
            continue
        words = key.split()
        bases: list[str] = []
        if len(words) >= 2 and (words[0] in AGE_WORDS or words[0] in TITLE_WORDS):
            bases.append(" ".join(words[1:]))
            if len(words) >= 3 and words[1] in TITLE_WORDS:
                bases.append(" ".join(words[2:]))  # "YOUNG DR BENNETT"
        if len(words) == 2 and words[0] not in _ORDINALS and not re.search(r"\d", key):
            bases.append(words[0])  # "LUKE SKYWALKER" -> "LUKE"
        if len(words) == 2 and words[1] == "VOICE" and words[0].endswith("'S"):
            bases.append(words[0][:-2])  # "BEN'S VOICE" -> "BEN"
        if len(words) == 1:
            # "KEATING" and "MR KEATING" both present: join them, whichever is larger.
            bases.extend(
                other
                for other in counts
                if other.split()[1:] == words and other.split()[0] in TITLE_WORDS
            )
        for base in bases:
            if base in counts and base != key and not is_group(base):
                a, b = root(key), root(base)
                if a != b:
                    winner, loser = sorted((a, b), key=rank)
                    parent[loser] = winner
                break
    groups: dict[str, list[str]] = {}
    for key in counts:
        groups.setdefault(root(key), []).append(key)
    infos = []
    for canonical, members in groups.items():
        merged: Counter = Counter()
        for member in members:
            merged.update(spellings[member])
        own = spellings[canonical].most_common(1)[0][0]
        infos.append(
            CharacterInfo(
                key=canonical,
                name=own,
                count=sum(counts[m] for m in members),
                first=min(first[m] for m in members),
                variants=[v for v, _ in merged.most_common()],
                group=is_group(canonical),
            )
        )
    infos.sort(key=lambda c: (-c.count, c.first))
    return infos, {key: root(key) for key in counts}


def is_group(key: str) -> bool:
    words = key.split()
    return (
        any(w in GROUP_WORDS for w in words)
        or "AND" in words
        or "&" in key
        or "/" in key
        or "," in key
    )


# -- masking -------------------------------------------------------------------------------


def mask_words(info: CharacterInfo, *, shared: Callable[[str], bool], common: set[str]) -> set[str]:
    """Every way the script names ``info``: its spellings and their distinctive words.

    A word of a longer spelling ("SKYWALKER" of "LUKE SKYWALKER") counts on its own
    unless it is a title, belongs to another character's name too (``shared``) or is
    an ordinary word the script also writes in lower case ("voice" of "LUKE'S VOICE").
    """
    forms = {name_key(v) for v in info.variants}
    for form in list(forms):
        words = form.split()
        if len(words) < 2:
            continue
        for word in words:
            word = re.sub(r"'S$", "", word)
            if (
                len(word) >= 3
                and word not in TITLE_WORDS
                and word not in AGE_WORDS
                and word not in _ORDINALS
                and not any(c.isdigit() for c in word)
                and word.lower() not in common
                and not shared(word)
            ):
                forms.add(word)
    return forms


class NameMasker:
    """Finds and masks the main characters' names in a movie's narration.

    ``forms`` maps a character's canonical key to its name forms (as :func:`name_key`
    writes them). Whole words, case-insensitive, possessives kept ("Neil's" ->
    "P0's"). A one-word form that the script also uses as an ordinary lower-case word
    ("will", "hope") counts only when capitalised, unless ``any_case`` (speaker slots,
    which are all lower case).
    """

    def __init__(self, forms: dict[str, set[str]], common_words: set[str]) -> None:
        self.lookup: dict[str, tuple[str, bool]] = {}
        for key, names in forms.items():
            for form in names:
                common = " " not in form and form.lower() in common_words
                self.lookup.setdefault(form, (key, common))
        alternatives = sorted(self.lookup, key=len, reverse=True)
        self.pattern = (
            re.compile(
                r"(?<!\w)(?<!\w['\u2019])(?:"
                + "|".join(r"\.?\s+".join(map(_word_pattern, f.split())) for f in alternatives)
                + r")(?!\w)",
                re.IGNORECASE,
            )
            if alternatives
            else None
        )

    def _key(self, match: re.Match[str], any_case: bool) -> str | None:
        found = match.group()
        key, needs_capital = self.lookup.get(name_key(found), ("", False))
        if not key or (needs_capital and not any_case and not found[0].isupper()):
            return None
        return key

    def names_in(self, text: str, *, any_case: bool = False) -> list[str]:
        """Canonical keys of the characters ``text`` names, in the order it first names them.

        A list, not a set: mask codes are handed out in this order, and a set's order
        would change with ``PYTHONHASHSEED`` from one process to the next.
        """
        if self.pattern is None:
            return []
        found = (self._key(m, any_case) for m in self.pattern.finditer(text))
        return list(dict.fromkeys(key for key in found if key))

    def mask(self, text: str, codes: dict[str, str], *, any_case: bool = False) -> str:
        """``text`` with every character in ``codes`` (key -> "P0") replaced by its code."""
        if self.pattern is None or not codes:
            return text

        def replace(match: re.Match[str]) -> str:
            key = self._key(match, any_case)
            return codes[key] if key in codes else match.group()

        return self.pattern.sub(replace, text)


def _word_pattern(word: str) -> str:
    # name_key folds the typographic apostrophe into "'"; the text may have either.
    return re.escape(word).replace("'", "['\u2019]")


def group_members(key: str) -> list[str]:
    """The names in a group cue: "LUKE AND HAN" -> ["LUKE", "HAN"]."""
    return [part.strip() for part in re.split(r"\bAND\b|&|/|,", key) if part.strip()]


def lowercase_words(scenes: Iterable[ParsedScene]) -> set[str]:
    """Words the script writes in lower case somewhere (so "will" is a word, not Will)."""
    words: set[str] = set()
    for scene in scenes:
        for item in scene.items:
            texts = [item.text] if isinstance(item, Action) else [t for _, t in item.parts]
            for text in texts:
                words.update(re.findall(r"\b[a-z][a-z'\u2019]*\b", text))
    return words
