"""The episodic layer (L0, beside the distilled items): every informative
message of an episode kept as a 'turn' memory of its own, as it was said, by whom and when.

Pure: which messages become turns and what each turn's text is. memworker/ingest/processing.py embeds
and stores them in the same transaction as the reflected items; docs/episodes.md says how
long they live. The rules, stated once:
- skipped: a message with no searchable word (tokens.tokenize is empty: punctuation, emoji,
  stop words only) or made only of acknowledgement words ("ok", "thanks", "haha", "hi"...);
- split, never cut: a message longer than memories.MAX_TEXT_CHARS becomes consecutive parts
  at sentence (else word) boundaries, each part a turn with the same provenance;
- one message, one document: BM25 indexes a split message once, on its first part, as the
  whole message (Turn.message_text; the other parts index nothing), so a long message does
  not enter recall as several short documents, each a better match per word than the message
  is; each part keeps its own text, the message is embedded once, by its first part (ingest
  gives the other parts its vector; recall takes only the first as a vector candidate), and
  every part knows how many its message has (Turn.parts), which recall's part discount reads;
  the items reflected from a message carry its count too (item_parts), being its sentences
  (docs/episodes.md, "Long messages");
- the text is "<speaker> (<date>): <content>", so BM25 matches names and dates and the
  embedding sees who said it; the date is the message's occurred_at, else the episode's;
- a short reply is read with the question it answers: a message kept whole that follows a
  question ("What city is it?" / "That's Boston!") is indexed and embedded with that question
  (Turn.asked, replying), its text staying its own words; not when both messages name the same
  speaker (who goes on after their own question is not answering it)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memworker.domain import memories, tokens

# Words that carry no content by themselves: a message made only of these is not a memory.
ACKNOWLEDGEMENTS = frozenset(
    (
        "ok okay k kk yes yeah yep yup no nope sure thanks thank thx ty cool great nice good fine "
        "haha hahaha lol lmao hehe hi hello hey bye goodbye cya wow oh ah hmm hm right alright"
    ).split()
)
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+")


@dataclass(frozen=True)
class Turn:
    message: int  # index of the message in the episode (the '#m<i>' of its provenance)
    part: int  # 0-based part of a split message
    text: str
    role: str
    speaker: str | None
    occurred_at: datetime | None
    # what BM25 indexes for a part of a split message: the whole message for its first part,
    # nothing ("") for the others; None: the part's own text (a message kept whole)
    message_text: str | None = None
    parts: int = 1  # how many parts the message was split into
    asked: str = ""  # the question a short reply answers (replying); "" for any other message

    @property
    def embedded(self) -> str:
        """What is embedded: the text, and the question a short reply answers."""
        return f"{self.text} {self.asked}" if self.asked else self.text

    @property
    def source_key(self) -> str:
        return f"t{self.message}.{self.part}"


def informative(content: str) -> bool:
    words = re.findall(r"\w+", content.casefold())
    if not words or all(w in ACKNOWLEDGEMENTS for w in words):
        return False
    return bool(tokens.tokenize(content))


def split(text: str, limit: int) -> list[str]:
    """Consecutive parts of at most `limit` characters, cut between sentences where possible,
    else between words; nothing is dropped (a single longer word is cut hard)."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return [text]
    parts: list[str] = []
    current = ""
    for piece in _pieces(text, limit):
        if current and len(current) + 1 + len(piece) > limit:
            parts.append(current)
            current = piece
        else:
            current = f"{current} {piece}" if current else piece
    if current:
        parts.append(current)
    return parts


def _pieces(text: str, limit: int) -> list[str]:
    out: list[str] = []
    for sentence in _SENTENCE_END.split(text):
        if len(sentence) <= limit:
            out.append(sentence)
            continue
        for word in sentence.split(" "):
            out += [word[i : i + limit] for i in range(0, len(word), limit)] or [word]
    return out


def _stamp(when: datetime | None) -> str:
    return f"{when.day} {when:%B %Y}" if when else ""


def turns(messages: list[dict[str, Any]] | None, content: str, occurred_at: datetime | None) -> list[Turn]:
    """The turns of one episode; a content-only episode is one message (m0)."""
    msgs = messages or [{"role": "user", "content": content}]
    out: list[Turn] = []
    for i, m in enumerate(msgs):
        body = str(m.get("content") or "")
        if not informative(body):
            continue
        when = _parse(m.get("occurred_at")) or occurred_at
        speaker = m.get("name") or None
        label = speaker or m.get("role") or "user"
        head = f"{label} ({_stamp(when)}): " if when else f"{label}: "
        texts = [head + part for part in split(body, memories.MAX_TEXT_CHARS - len(head))]
        # a long message says what it is about itself; BM25's one document is its parts as stored
        asked = replying(msgs[i - 1] if i else {}, m) if len(texts) == 1 else ""
        first = " ".join(texts) if len(texts) > 1 else f"{texts[0]} {asked}" if asked else None
        role = str(m.get("role") or "user")
        for p, text in enumerate(texts):
            indexed = first if p == 0 else ""
            out.append(Turn(i, p, text, role, speaker, when, indexed, len(texts), asked))
    return out


def replying(before: dict[str, Any], message: dict[str, Any]) -> str:
    """The questions the message just before asked (its last sentences that end with '?', at
    most two), unless the two name the same speaker or are of different subjects: a short
    reply ("That's Boston!", "A park near my place") says what it is about only with them, so
    it is indexed and embedded with them; its text stays its own. Unnamed messages count as two
    speakers, whatever their roles: a plain chat log sent without names alternates speakers,
    and a user who goes on after their own question is mostly saying more about it. One
    subject's words never index another subject's memory."""
    text = str(before.get("content") or "")
    speaker = before.get("name")
    if not text or speaker and speaker == message.get("name") or before.get("subject") != message.get("subject"):
        return ""
    asked = [s for s in _SENTENCE_END.split(" ".join(text.split())) if s.endswith("?")]
    return " ".join(asked[-2:])


def message_parts(turns: list[Turn]) -> dict[int, int]:
    """Each message's part count, by its index in the episode."""
    return {t.message: t.parts for t in turns}


def item_parts(parts: dict[int, int], messages: tuple[int, ...], *, content_only: bool) -> int:
    """The part count a reflected item carries, so recall weighs it as it weighs its message:
    an item distilled from a long message is one of its many sentences, with that message's
    many chances at matching a query. The fewest among its messages (an item that also names
    a short message may restate it); an item naming none is its content-only episode's one
    message's, else (it speaks for the whole exchange) counted whole."""
    if not messages:
        return parts.get(0, 1) if content_only else 1
    return min(parts.get(m, 1) for m in messages)


def _parse(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str) and value:
        return datetime.fromisoformat(value)
    return None
