"""The offline reflector's second opinion on what it wrote (memworker.reflection.settle), from
hand-written example sentences of each kind (kinds.txt beside this file) in the embedder's space.

The rules (memworker/reflection.py) type a sentence by its cues and call what has no cue a
'fact'. Much small talk has no cue either ("Can't complain, all things considered."), and
neither has a taste or a plan said in other words. So an item the rules left a plain 'fact' is
weighed against the examples, using the vector the write computes for it anyway:

- it is small talk, and no item, when it names nothing (no number, and no capitalised name past
  its first word but one it only addresses: the caller says), is short (SMALL_TALK_WORDS), and
  its nearest small-talk examples are nearer than its nearest examples of the other kinds (the
  mean cosine of the 5 nearest of each side);
- otherwise it takes the kind whose 3 nearest examples are nearest, when that is not 'fact' and
  leads 'fact' by KIND_MARGIN.

An item dropped gives its place to the reflector's next-best sentence that holds (its spares).
With the episodic layer on, the message stays a turn whatever is decided here. An item with a cue, and every item an LLM
wrote, is left as it is."""

from __future__ import annotations

import re
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from memworker.models.embeddings import Embedder

EXAMPLES = Path(__file__).with_name("kinds.txt")
SMALL_TALK = "smalltalk"
NEAREST_SMALL_TALK = 5  # examples per side averaged for the small-talk verdict
NEAREST_KIND = 3  # examples per kind averaged for a kind
# Small talk is short: 95 % of the small-talk sentences of the dev half of
# bench/data/written/kinds.jsonl have at most 23 words. A longer sentence is never small talk
# here ("I've never felt anxious about my grammar after feedback, but ..." is a statement).
SMALL_TALK_WORDS = 25
# Measured on the dev half of bench/data/written/kinds.jsonl: kind accuracy was the same for every
# margin from 0 to 0.1; the middle of that range.
KIND_MARGIN = 0.05
_NUMBER = re.compile(r"\d")


@dataclass(frozen=True)
class Examples:
    rows: dict[str, np.ndarray]  # kind -> the indexes of its rows
    vectors: np.ndarray  # unit rows, in the embedder's space

    def small_talk(self, sims: np.ndarray) -> bool:
        mine = np.sort(sims[self.rows[SMALL_TALK]])[-NEAREST_SMALL_TALK:]
        others = np.sort(np.delete(sims, self.rows[SMALL_TALK]))[-NEAREST_SMALL_TALK:]
        return bool(mine.mean() > others.mean())

    def kind(self, sims: np.ndarray) -> str:
        near = {k: float(np.sort(sims[at])[-NEAREST_KIND:].mean()) for k, at in self.rows.items() if k != SMALL_TALK}
        best = max(near, key=lambda k: near[k])
        return best if near[best] - near["fact"] > KIND_MARGIN else "fact"


def read_examples(path: Path = EXAMPLES) -> list[tuple[str, str]]:
    """(kind, sentence) pairs from an examples file."""
    out: list[tuple[str, str]] = []
    kind = None
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            kind = line[1:-1]
            continue
        if kind is None:
            raise ValueError(f"{path}: {line!r} comes before any [kind] line")
        out.append((kind, line))
    return out


_lock = threading.Lock()
_embedded: weakref.WeakKeyDictionary[Embedder, Examples] = weakref.WeakKeyDictionary()


def examples_for(embedder: Embedder) -> Examples:
    """The examples embedded by this embedder, once per embedder."""
    with _lock:
        found = _embedded.get(embedder)
        if found is None:
            pairs = read_examples()
            labels = np.array([k for k, _ in pairs])
            rows = {str(k): np.flatnonzero(labels == k) for k in dict.fromkeys(k for k, _ in pairs)}
            found = Examples(rows, embedder.embed([s for _, s in pairs]))
            _embedded[embedder] = found
        return found


def weigh(text: str, named: bool, vector: np.ndarray, embedder: Embedder) -> str | None:
    """The kind of a plain 'fact' item as the examples see it, None when it is small talk; one
    that names something (`named`: a name, a number) is never small talk."""
    examples = examples_for(embedder)
    sims = examples.vectors @ vector
    if not (named or _NUMBER.search(text)) and len(text.split()) <= SMALL_TALK_WORDS and examples.small_talk(sims):
        return None
    return examples.kind(sims)
