"""Sleep's distillation (the pass compresses): a window's turns become fewer durable
'summary' memories that keep what a later question needs (who said it, when, the names,
numbers and places), each naming exactly the messages whose content it carries.

Pure: no I/O. memworker.sleep.consolidation embeds and stores what this returns, and marks each
carried turn (carried_by) so retention can let it go (docs/lifecycle.md, "Forgetting by value").

The offline rule, stated once:
- turns are grouped by (subject, episode) in message order: a summary never mixes two
  conversations or two subjects;
- each turn's content is cut into sentences; a sentence made only of conversational filler
  (greetings, reactions, acknowledgements, "how are you") carries nothing and is dropped, and
  a kept sentence loses a leading interjection ("Wow,", "Oh,", "Haha");
- what is left is packed in message order, "<date>: <speaker>: <sentences> <speaker>: ...",
  sentence by sentence into summaries of at most memories.MAX_TEXT_CHARS (a new date starts a
  new summary); a turn whose sentences run over into the next summary is named by both, and is
  carried by the last. Nothing but filler is dropped;
- a summary names the messages whose sentences it holds; a turn with nothing but filler is
  carried by the summary of its stretch without being named (it adds nothing to find)."""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memworker.domain import episodic, memories, tokens
from memworker.models import llm

SALIENCE = 0.6
CONFIDENCE = 0.8  # what was said, condensed: as sure as the turns themselves
_PROVENANCE = re.compile(r"^(episode:[^#]+)#m(\d+)$")
# Words that carry no fact by themselves in conversation: greetings, reactions, fillers. A
# sentence made only of these (and stop words) is dropped from a summary.
FILLER = episodic.ACKNOWLEDGEMENTS | frozenset(
    (
        "awesome amazing awful love loved lovely glad happy sorry sad congrats congratulations "
        "really so very totally super pretty quite much lot lots kind kinda sort sorta thing things stuff "
        "sound sounds sounded seem seems look looks looking see seeing saw hear heard hearing know knew "
        "think thought guess mean means feel feeling glad appreciate appreciated cheers welcome "
        "omg aw aww awww ooh um uh hmmm yay woah whoa dear gosh "
        "how what whats why who where when been have has had doing going get got go up new "
        "anything something everything nothing you your yours me my mine i im ive we us our "
        "too also well just still always definitely absolutely exactly true indeed "
        "fun incredible fantastic wonderful beautiful interesting exciting excited cute sweet "
        "talk soon later catch care luck wish wishes hope hoping bet wait can cant glad share sharing take"
    ).split()
)
_INTERJECTION = re.compile(
    r"^(?:(?:hey|hi|hello|wow|oh|ah|aw+|yeah|yes|yep|haha+|hehe|lol|omg|ooh|um|uh|well|so|"
    r"thanks|thank you|ok|okay|cool|great|nice|awesome|amazing|sure)\b[\s,!.…-]*)+",
    re.IGNORECASE,
)

# Hedges, intensifiers and articles: they change how a thing is said, not what (a summary is
# written in note style); and the "a photo of" of image captions.
_FLUFF = re.compile(
    r"\b(?:really|totally|pretty|super|actually|basically|literally|honestly|kinda|kind of|sort of|"
    r"you know|i mean|by the way|so much|a lot|a photo of|a photography of|a picture of|an image of|"
    r"so|very|just|the|an|a(?! lot)(?=\s))\b ?",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Turn:
    """One turn of the window, as distillation sees it."""

    id: str
    episode: str  # 'episode:<id>'
    message: int
    speaker: str
    content: str  # what was said, without the "<speaker> (<date>): " head
    occurred_at: datetime | None
    group: Hashable  # (subject, episode): summaries never cross it

    @property
    def subject(self) -> str | None:
        key = self.group
        return key[0] if isinstance(key, tuple) and key and isinstance(key[0], str) else None


@dataclass
class Summary:
    text: str
    episode: str
    messages: list[int] = field(default_factory=list)  # named in provenance: their content is here
    carried: list[str] = field(default_factory=list)  # turn ids this summary answers for
    occurred_at: datetime | None = None
    speakers: list[str] = field(default_factory=list)
    subject: str | None = None

    @property
    def provenance(self) -> str:
        return f"{self.episode}#m{','.join(str(m) for m in sorted(set(self.messages)))}"


def turn_of(
    id: str, text: str, provenance: Sequence[str], metadata: dict[str, Any], subject: str | None
) -> Turn | None:
    """A stored 'turn' memory as a Turn, or None when its provenance is not one message."""
    match = _PROVENANCE.match(provenance[0]) if provenance else None
    if match is None:
        return None
    speaker = str(metadata.get("speaker") or metadata.get("role") or "user")
    when = _parse(metadata.get("occurred_at"))
    content = text
    if text.startswith(speaker):
        head, sep, rest = text.partition(": ")
        if sep and head.startswith(speaker) and len(head) <= len(speaker) + 24:
            content = rest
    return Turn(id, match.group(1), int(match.group(2)), speaker, content, when, (subject, match.group(1)))


def sentences(content: str, names: frozenset[str] = frozenset()) -> list[str]:
    """The sentences of content that carry something, each without a leading interjection
    or hedging words."""
    out = []
    for raw in episodic._SENTENCE_END.split(" ".join(content.split())):
        s = _FLUFF.sub("", _INTERJECTION.sub("", raw))
        s = " ".join(s.replace(" ,", ",").split()).strip(" ,-")
        if s and carries(s, names):
            out.append(s[0].upper() + s[1:])
    return out


def carries(sentence: str, names: frozenset[str] = frozenset()) -> bool:
    """True when the sentence states something: a number, a name other than a speaker's (as
    in "Thanks, Mel!"), or at least two words that are not filler. A question counts only with
    a number or a name: its content is in the answer."""
    if _has_number_or_name(sentence, names):
        return True
    if sentence.rstrip().endswith("?"):
        return False
    content = [w for w in tokens.tokenize(sentence, stem=False) if w not in FILLER and w not in names and len(w) > 1]
    return len(content) >= 2


def _has_number_or_name(sentence: str, names: frozenset[str]) -> bool:
    words = re.findall(r"[^\W_]+", sentence)
    for i, w in enumerate(words):
        if any(ch.isdigit() for ch in w):
            return True
        if i > 0 and w[0].isupper() and w.casefold() not in names and w.casefold() not in FILLER and w != "I":
            return True
    return False


def distil(turns: Sequence[Turn], *, limit: int = memories.MAX_TEXT_CHARS) -> list[Summary]:
    """The offline summaries of a window's turns (see the module's rule)."""
    out: list[Summary] = []
    by_group: dict[Hashable, list[Turn]] = {}
    for t in turns:
        by_group.setdefault(t.group, []).append(t)
    for group in by_group.values():
        group.sort(key=lambda t: (t.message, t.id))
        out += _pack(group, limit)
    return [s for s in out if s.messages]


def _pack(group: list[Turn], limit: int) -> list[Summary]:
    names = frozenset(w for t in group for w in tokens.tokenize(t.speaker, stem=False))
    out: list[Summary] = []
    idle: list[str] = []  # filler-only turns waiting for the summary of their stretch
    for t in group:
        kept = sentences(t.content, names)
        if not kept:
            idle.append(t.id)
            continue
        current = out[-1] if out and _day(out[-1].occurred_at) == _day(t.occurred_at) else None
        label = f"{t.speaker}:"
        for piece in _pieces(kept, limit - len(_head(t)) - len(label) - 1):
            if current is None or len(current.text) + len(label) + len(piece) + 2 > limit:
                current = _new(t, f"{_head(t)}{label} {piece}")
                out.append(current)
            elif current.messages[-1] == t.message or current.speakers[-1] == t.speaker:
                current.text += f" {piece}"  # the same speaker goes on: no second label
            else:
                current.text += f" {label} {piece}"
            if current.messages[-1] != t.message:
                current.messages.append(t.message)
            if t.speaker in current.speakers:
                current.speakers.remove(t.speaker)
            current.speakers.append(t.speaker)  # the last speaker last
        assert current is not None
        current.carried += [*idle, t.id]
        idle = []
    if idle and out:
        out[-1].carried += idle
    _carry_split_turns(out)
    return out


def _pieces(kept: list[str], room: int) -> list[str]:
    """The kept sentences, a sentence longer than a summary's room split between words."""
    return [p for sentence in kept for p in episodic.split(sentence, room)]


def _carry_split_turns(out: list[Summary]) -> None:
    """A turn split over several summaries is carried by its last part (every part names it)."""
    seen: dict[str, Summary] = {}
    for s in out:
        for tid in s.carried:
            seen[tid] = s
    for s in out:
        s.carried = [tid for tid in s.carried if seen[tid] is s]


def _new(t: Turn, text: str) -> Summary:
    return Summary(text, t.episode, [t.message], [], t.occurred_at, [t.speaker], t.subject)


def _head(t: Turn) -> str:
    return f"{_day(t.occurred_at)}: " if t.occurred_at else ""


def _day(when: datetime | None) -> str:
    return f"{when.day} {when:%B %Y}" if when else ""


def _parse(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            return None
    return None


# --- with an LLM: one call per window ----------------------------------------------------------

SYSTEM = (
    "You condense a conversation into a few memory notes. Each note is at most "
    f"{memories.MAX_TEXT_CHARS} characters, self-contained, and keeps who said or did what, when "
    "(the date given), and every name, number and place. Drop greetings and small talk. Answer "
    'with JSON only: [{"text": "...", "messages": [1, 2]}], where messages are the numbers of the '
    "lines whose content the note carries."
)


def prompt(turns: Sequence[Turn]) -> tuple[str, str]:
    lines = [f"{i}. [{_day(t.occurred_at) or 'undated'}] {t.speaker}: {t.content}" for i, t in enumerate(turns, 1)]
    return SYSTEM, "\n".join(lines)


def parse(raw: str, turns: Sequence[Turn]) -> list[Summary]:
    """The LLM's notes as summaries; a note citing lines of two groups is split by group.
    Raises ValueError when the answer is not a list of notes citing lines of the window."""
    notes = llm.parse_json(raw, want=list)
    out: list[Summary] = []
    for note in notes:
        if not isinstance(note, dict) or not isinstance(note.get("text"), str):
            raise ValueError("a note is not {'text': ..., 'messages': [...]}")
        text = memories.clip(note["text"])
        cited = [n for n in note.get("messages") or [] if isinstance(n, int) and 1 <= n <= len(turns)]
        if not text or not cited:
            continue
        groups: dict[Hashable, list[Turn]] = {}
        for n in sorted(set(cited)):
            groups.setdefault(turns[n - 1].group, []).append(turns[n - 1])
        for members in groups.values():
            first = members[0]
            out.append(
                Summary(
                    text,
                    first.episode,
                    [t.message for t in members],
                    [t.id for t in members],
                    first.occurred_at,
                    sorted({t.speaker for t in members}),
                    first.subject,
                )
            )
    if not out:
        raise ValueError("no note cites a line of the window")
    _carry_split_turns(out)
    return out


def with_llm(turns: Sequence[Turn], ask: Callable[[str, str], str | None]) -> tuple[list[Summary], str]:
    """(summaries, how): the LLM's notes, else the offline rule (its answer missing or malformed)."""
    answer = ask(*prompt(turns))
    if answer is None:
        return distil(turns), "rules (llm call failed)"
    try:
        return parse(answer, turns), "llm"
    except ValueError as exc:
        return distil(turns), f"rules (llm answer malformed: {exc})"
