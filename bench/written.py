"""What the reflective write and the sleep write put in memory, measured against people's notes.

LoCoMo sessions go through the API of a default `memworker up` (offline reflector, real
embeddings, one worker) as episodes, one agent per conversation: each session one episode of
messages {"role": "user", "name": speaker, "content": text [+ " [image: caption]"]}, posted
as bench/episodes_recall.py posts them. Conversations 1-5 are the dev split, 6-10 the report
(test) split; every figure is given for each apart. Then every live memory of each agent is
read back (GET memories): the reflected items (kinds fact, preference, decision, method, event,
conclusion; 'turn' rows are the episodic layer and are left out), then a sleep pass per agent
(POST consolidate, waited) and the memories again: the summaries, insights and conclusions the
pass wrote (ids that were not there before), and the profile (GET profile).

    python bench/written.py [--conversations 1,3-5] [--split dev|test|all] [--no-sleep]
        [--dump PATH] [--from-dump PATH] [--api-url URL --api-key KEY --data-dir DIR]
    python bench/written.py --sentence-ceiling   # no server, about 3 min

Measures (each for dev and test):

coverage   the share of LoCoMo's `observation`s (facts an LLM noted per session, each with the
           dia_ids it came from) that some reflected item of the same session states. Matcher,
           frozen: an observation is stated by a text when BOTH
             (a) meaning: the cosine of their embeddings (memworker.models.embeddings.for_settings
                 of the default Settings: the product's own model) is >= COSINE (0.45), and
             (b) key content (key_match): they share a name (a capitalised word of the
                 observation other than the conversation's speakers, pronouns, stop words and
                 dates, found case-insensitively as a word of the text), or a number (a digit
                 run), or a date word (a month or weekday name), or at least half of the
                 observation's content terms (memworker.domain.tokens stems, stop words and the
                 speakers' names out) are terms of the text.
           An item is "of a session" when its provenance maps to a message of that session's
           episode. Each observation's best item is the highest-cosine item passing (b), else the
           highest-cosine item; the matcher's verdict on that pair is the coverage verdict.
           The hand check: bench/data/written/matcher_check.jsonl, 100 (observation, best item)
           pairs (50 dev, 50 test, picked by a hash of the observation) judged yes/no by a person
           (yes: the item alone tells a reader the observation's main point). COSINE was 0.55
           a priori (80 % agreement); 0.45 was picked among 0.55 / 0.50 / 0.45 on that same
           check (86 %), so the agreement the report gives is optimistic. The matcher leans
           strict: most disagreements are paraphrases it misses, so coverage is a lower bound.
distilled  the share of items that are not distilled: the normalised item text
           (memories.normalise) equals the normalised source message (the whole message copied,
           target <= 20 %); and, beside it, items that are a word-for-word span of the source
           message (a sentence copied).
precision  over the items labelled in bench/data/written/item_labels.jsonl (keyed by the
           normalised item text and the source dia_id, so labels survive a re-run): the share
           labelled 1 (a real fact, preference, plan or event of a speaker worth remembering;
           0: small talk, a question, filler, a fragment). Items without a label are counted
           apart as unlabelled.
kinds      the offline reflector (memworker.reflection.OfflineReflector().reflect on a
           one-message episode) on bench/data/written/kinds.jsonl: accuracy of the first
           item's kind against the label (preference, fact, decision, method, event,
           smalltalk: small talk is right when no item comes out), per split (hash of the text)
           and source, with the confusion; and the share of small-talk messages that still
           produced an item. No server needed.
summaries  after the sleep pass: the share of a session's observations that the summaries of
           that session's episode state (the same matcher, over each summary sentence), beside
           the share LoCoMo's own session_summary states (over its sentences).
stems      user-facing texts (items, summaries, insights, conclusions, the profile's strings)
           holding a token that is a stem, not a word: a lower-case alphabetic token of 4+
           letters that is not a whole word of any message of the conversation but is a
           prefix or the Porter stem (memworker.domain.tokens) of one ("decemb", "approv", "happi"),
           and not one of its words with -s, -es or -ies added (an item told in its speaker's
           name: "Calvin works" where he said "I work").

--sentence-ceiling prints coverage, in process, by the items the write keeps (the offline
reflector and reflection.settled) beside every sentence the reflector reads as informative
with no cap on items and beside every message kept whole: how far picking sentences can go.

--dump PATH keeps what the run read (items, derived memories, profile) as JSON; --from-dump
PATH measures it again without a server (the matcher and labels are the same). Writes
bench/results/written.md (or $MEMWORKER_BENCH_RESULTS/written.md)."""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from _common import (  # noqa: E402
    add_stack_args,
    command_line,
    environment_note,
    loadavg,
    md_table,
    progress,
    run_key,
    stack_from_args,
    write_report,
)
from episodes_recall import DATA, Conversation, Mapper, episode_bodies, load, post_episodes, wait_stored  # noqa: E402

from memworker import Client  # noqa: E402
from memworker.domain import memories, tokens  # noqa: E402

LABELS = Path(__file__).resolve().parent / "data" / "written"
REFLECTED = ("fact", "preference", "decision", "method", "event", "conclusion")
DERIVED = ("summary", "insight", "conclusion")
COSINE = 0.45
CONTENT_SHARE = 0.5
KIND_LABELS = ("preference", "fact", "decision", "method", "event", "smalltalk")
_MONTHS = (
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec"
).split()
_DAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
_WORD = re.compile(r"[A-Za-z][A-Za-z'’]*")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


# --- data ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Observation:
    conv: str
    session: int
    speaker: str
    text: str
    dia_ids: tuple[str, ...]


@dataclass
class Notes:
    """LoCoMo's people's notes of one conversation."""

    observations: list[Observation] = field(default_factory=list)
    summaries: dict[int, str] = field(default_factory=dict)  # session -> session_summary


def load_notes(path: Path, sample_ids: Iterable[str]) -> dict[str, Notes]:
    wanted = set(sample_ids)
    out: dict[str, Notes] = {}
    for raw in json.loads(path.read_text()):
        if raw["sample_id"] not in wanted:
            continue
        notes = Notes()
        for key, by_speaker in raw["observation"].items():
            session = int(re.search(r"\d+", key).group(0))  # type: ignore[union-attr]
            for speaker, rows in by_speaker.items():
                for text, dias in rows:
                    ids = (dias,) if isinstance(dias, str) else tuple(dias)
                    notes.observations.append(Observation(raw["sample_id"], session, speaker, text, ids))
        for key, text in raw["session_summary"].items():
            notes.summaries[int(re.search(r"\d+", key).group(0))] = str(text)  # type: ignore[union-attr]
        out[raw["sample_id"]] = notes
    return out


def split_of(conv: Conversation) -> str:
    return "dev" if conv.index < 5 else "test"


def pick(spec: str | None, split: str) -> list[int]:
    """0-based indexes of the conversations chosen: --conversations "1,3-5" (1-based) within the split."""
    chosen = set(range(10))
    if spec:
        chosen = set()
        for part in spec.split(","):
            lo, _, hi = part.partition("-")
            chosen |= set(range(int(lo) - 1, int(hi or lo)))
    if split != "all":
        chosen &= set(range(0, 5) if split == "dev" else range(5, 10))
    return sorted(chosen)


# --- reading the agents back -----------------------------------------------------------------


def all_memories(client: Client, agent: str) -> list[dict[str, Any]]:
    out, cursor = [], None
    while True:
        page = client.list_memories(agent, limit=500, cursor=cursor)
        out += page["memories"]
        cursor = page.get("next_cursor")
        if not cursor:
            return out


def profile_texts(sections: dict[str, Any]) -> list[str]:
    """The texts of the profile's entries (each section a list of {"text": ...} entries)."""
    return [str(e["text"]) for entries in sections.values() for e in entries if isinstance(e, dict) and "text" in e]


def slim(m: dict[str, Any], mapper: Mapper) -> dict[str, Any]:
    return {
        "id": m["id"],
        "text": m["text"],
        "kind": m["kind"],
        "provenance": m.get("provenance") or [],
        "dia_ids": sorted(mapper.covers(m)),
    }


def collect(args: argparse.Namespace, convs: list[Conversation]) -> dict[str, Any]:
    """Post the sessions, read the items back, sleep, read again; what was read, as JSON."""
    from memworker.settings import Settings

    max_bytes = Settings().max_content_bytes
    dump: dict[str, Any] = {"agents": {}, "timings": {}}
    with stack_from_args(args, raise_limits=True) as stack:
        key, tag = run_key(stack, "written")
        with Client(stack.api_url, key, timeout=600) as client:
            agents = {c.sample_id: f"written-{tag}-{c.sample_id}" for c in convs}
            mappers: dict[str, Mapper] = {}
            started = time.perf_counter()
            n = 0
            for conv in convs:
                eps = post_episodes(client, agents[conv.sample_id], conv, "written", max_bytes)
                mappers[conv.sample_id] = Mapper(eps)
                n += len(eps)
            wait = wait_stored(client, list(agents.values()), n, args.timeout, "episodes stored")
            dump["timings"]["ingest_s"] = took = time.perf_counter() - started
            dump["episodes"] = wait["statuses"]
            messages = sum(len(s.turns) for c in convs for s in c.sessions)
            # a figure line bench/ab.py collects: an A/B of the write on named conversations
            print(f"ingest: {n} episodes, {messages} messages stored in {took:.1f} s, {messages / took:.1f} messages/s")
            for conv in convs:
                rows = all_memories(client, agents[conv.sample_id])
                dump["agents"][conv.sample_id] = {
                    "agent": agents[conv.sample_id],
                    "before": [slim(m, mappers[conv.sample_id]) for m in rows if m["kind"] != "turn"],
                    "turns": sum(m["kind"] == "turn" for m in rows),
                }
            if not args.no_sleep:
                sleep(client, convs, agents, mappers, dump)
        dump["note"] = environment_note(args.load_before, command_line(), stack)
    return dump


def sleep(
    client: Client, convs: list[Conversation], agents: dict[str, str], mappers: dict[str, Mapper], dump: dict[str, Any]
) -> None:
    started = time.perf_counter()
    runs = {sid: client.consolidate(agent) for sid, agent in agents.items()}
    for conv in progress(convs, desc="sleep passes", unit="agent"):
        sid = conv.sample_id
        run = client.wait_for_run(agents[sid], runs[sid], timeout=1800)
        before = {m["id"] for m in dump["agents"][sid]["before"]}
        rows = all_memories(client, agents[sid])
        entry = dump["agents"][sid]
        entry["run"] = {k: v for k, v in run.items() if isinstance(v, str | int | float)}
        entry["after"] = [slim(m, mappers[sid]) for m in rows if m["kind"] != "turn"]
        entry["derived"] = [slim(m, mappers[sid]) for m in rows if m["kind"] in DERIVED and m["id"] not in before]
        entry["profile"] = profile_texts(client.profile(agents[sid]).get("sections", {}))
    dump["timings"]["sleep_s"] = time.perf_counter() - started


# --- the matcher (frozen: bench/data/written/matcher_check.jsonl checks it) -----------------


_PRONOUNS = frozenset("i he she they we you it his her their our my me him them us its".split())


def _names(text: str, speakers: frozenset[str]) -> set[str]:
    """Capitalised words, lower-cased, without the speakers, stop words, pronouns and dates."""
    out = set()
    for w in re.findall(r"\b[A-Z][A-Za-z0-9+&-]*", text):
        low = w.lower()
        if low in speakers or low in tokens.STOP_WORDS or low in _PRONOUNS or low in _MONTHS or low in _DAYS:
            continue
        out.add(low)
    return out


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9+&-]+", text.lower()))


def content_terms(text: str, speakers: frozenset[str]) -> set[str]:
    drop = {tokens.stem_word(s) for s in speakers} | set(speakers)
    return {t for t in tokens.tokenize(text, stem=True) if t not in drop and len(t) > 1}


def key_match(observation: str, text: str, speakers: frozenset[str]) -> str:
    """Why text shares the observation's key content ("name", "number", "date", "words"), or ""."""
    words = _words(text)
    if _names(observation, speakers) & words:
        return "name"
    if set(re.findall(r"\d+", observation)) & set(re.findall(r"\d+", text)):
        return "number"
    dates = {w for w in _words(observation) if w in _MONTHS or w in _DAYS}
    if dates & words:
        return "date"
    terms = content_terms(observation, speakers)
    if terms and len(terms & content_terms(text, speakers)) >= CONTENT_SHARE * len(terms):
        return "words"
    return ""


class Embedder:
    """The product's embedding model (default Settings), with a cache by text."""

    def __init__(self) -> None:
        from memworker.models.embeddings import for_settings
        from memworker.settings import Settings

        self.model = for_settings(Settings())
        self.cache: dict[str, Any] = {}

    def vectors(self, texts: Sequence[str]) -> Any:
        import numpy as np

        todo = sorted({t for t in texts if t not in self.cache})
        for i in progress(range(0, len(todo), 256), desc="embedding", unit="batch"):
            part = todo[i : i + 256]
            for t, v in zip(part, self.model.embed(part), strict=True):
                self.cache[t] = v / (np.linalg.norm(v) or 1.0)
        return np.stack([self.cache[t] for t in texts]) if texts else np.zeros((0, self.model.dim))


@dataclass(frozen=True)
class Verdict:
    stated: bool
    best: str  # the pair the hand check judges: best-cosine text passing the key test, else best-cosine
    cosine: float
    key: str


def judge(observation: str, texts: Sequence[str], cosines: Sequence[float], speakers: frozenset[str]) -> Verdict:
    if not texts:
        return Verdict(False, "", 0.0, "")
    keyed = [(c, t, k) for c, t in zip(cosines, texts, strict=True) if (k := key_match(observation, t, speakers))]
    if keyed:
        c, t, k = max(keyed, key=lambda x: x[0])
        return Verdict(c >= COSINE, t, float(c), k)
    c, t = max(zip(cosines, texts, strict=True), key=lambda x: x[0])
    return Verdict(False, t, float(c), "")


def judge_all(
    emb: Embedder,
    observations: Sequence[Observation],
    pool: dict[tuple[str, int], list[str]],
    speakers: dict[str, frozenset[str]],
) -> list[Verdict]:
    """Each observation against the texts of its (conversation, session)."""
    everything = [o.text for o in observations] + [t for ts in pool.values() for t in ts]
    emb.vectors(everything)
    out = []
    for o in observations:
        texts = pool.get((o.conv, o.session), [])
        if not texts:
            out.append(Verdict(False, "", 0.0, ""))
            continue
        cos = emb.vectors(texts) @ emb.vectors([o.text])[0]
        out.append(judge(o.text, texts, [float(x) for x in cos], speakers[o.conv]))
    return out


# --- measures ---------------------------------------------------------------------------------


def session_of(dia: str) -> int:
    return int(dia[1:].split(":")[0])


def by_session(rows: Iterable[dict[str, Any]], conv: str, texts: Any = None) -> dict[tuple[str, int], list[str]]:
    out: dict[tuple[str, int], list[str]] = defaultdict(list)
    for m in rows:
        for s in sorted({session_of(d) for d in m["dia_ids"]}):
            out[(conv, s)] += texts(m) if texts else [m["text"]]
    return out


def summary_sentences(text: str) -> list[str]:
    """A summary's sentences without its "<date>: " head and "<speaker>: " marks."""
    text = re.sub(r"^\d{1,2} \w+ \d{4}: ", "", text)
    text = re.sub(r"(?:(?<=^)|(?<=\s))[A-Z][a-z]+: ", "", text)
    return [s for s in _SENTENCE.split(text) if s.strip()]


def pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f} % ({part:g}/{whole:g})" if whole else "-"


def splits_of(convs: Sequence[Conversation]) -> list[tuple[str, set[str]]]:
    out = [(sp, {c.sample_id for c in convs if split_of(c) == sp}) for sp in ("dev", "test")]
    return [(sp, ids) for sp, ids in out if ids]


def item_key(text: str, dia: str) -> str:
    return f"{memories.normalise(text)}|{dia}"


def item_labels(ctx: Context) -> dict[str, int]:
    """The frozen item labels by item_key: each labelled sentence as its speaker said it, and as
    the write tells it in their name (memworker.domain.voice), so a label holds for either."""
    labels = load_jsonl("item_labels.jsonl")
    try:
        from memworker.domain import voice
    except ImportError:  # code from before items were told (bench/ab.py --bench-from-head)
        return {item_key(r["text"], r["dia_id"]): int(r["label"]) for r in labels}
    speakers = {(c.sample_id, t.dia_id): t.speaker for c in ctx.convs for t in c.turns}
    out: dict[str, int] = {}
    for r in labels:
        out[item_key(r["text"], r["dia_id"])] = int(r["label"])
        name = voice.person(speakers.get((r["conv"], r["dia_id"])))
        if name:
            out[item_key(memories.clip(voice.told_by(r["text"], name)), r["dia_id"])] = int(r["label"])
    return out


def load_jsonl(name: str) -> list[dict[str, Any]]:
    path = LABELS / name
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def hash_split(text: str) -> str:
    return "dev" if hashlib.sha1(text.encode()).digest()[0] % 2 == 0 else "test"


@dataclass
class Context:
    convs: list[Conversation]
    notes: dict[str, Notes]
    dump: dict[str, Any]
    emb: Embedder
    messages: dict[str, dict[str, str]] = field(default_factory=dict)  # conv -> dia_id -> content
    speakers: dict[str, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def build(
        cls, convs: list[Conversation], notes: dict[str, Notes], dump: dict[str, Any], emb: Embedder | None = None
    ) -> Context:
        ctx = cls(convs, notes, dump, emb or Embedder())
        for c in convs:
            ctx.messages[c.sample_id] = {t.dia_id: t.content for t in c.turns}
            ctx.speakers[c.sample_id] = frozenset(t.speaker.lower() for t in c.turns)
        return ctx

    def items(self, sid: str) -> list[dict[str, Any]]:
        return [m for m in self.dump["agents"][sid]["before"] if m["kind"] in REFLECTED]

    def observations(self, ids: set[str]) -> list[Observation]:
        return [o for sid in sorted(ids) for o in self.notes[sid].observations]


def coverage(ctx: Context, ids: set[str]) -> tuple[list[Observation], list[Verdict], list[Verdict]]:
    """(observations, verdict against the items, verdict against the session's own messages)."""
    obs = ctx.observations(ids)
    items: dict[tuple[str, int], list[str]] = {}
    turns: dict[tuple[str, int], list[str]] = defaultdict(list)
    for sid in sorted(ids):
        items |= by_session(ctx.items(sid), sid)
        for dia, content in ctx.messages[sid].items():
            turns[(sid, session_of(dia))].append(content)
    return obs, judge_all(ctx.emb, obs, items, ctx.speakers), judge_all(ctx.emb, obs, turns, ctx.speakers)


def copied(ctx: Context, sid: str, item: dict[str, Any]) -> tuple[bool, bool]:
    """(the whole source message copied, a word-for-word span of it)."""
    text = memories.normalise(item["text"])
    sources = [memories.normalise(ctx.messages[sid][d]) for d in item["dia_ids"] if d in ctx.messages[sid]]
    return any(text == s for s in sources), any(f" {text} " in f" {s} " for s in sources)


def precision(ctx: Context, ids: set[str], labels: dict[str, int]) -> tuple[int, int, int]:
    """(labelled items of the run, labelled 1, unlabelled items)."""
    got = [labels.get(item_key(m["text"], (m["dia_ids"] or [""])[0])) for sid in ids for m in ctx.items(sid)]
    known = [g for g in got if g is not None]
    return len(known), sum(known), len(got) - len(known)


def summaries(ctx: Context, ids: set[str]) -> tuple[list[Verdict], list[Verdict], int]:
    """(verdicts against memworker's summaries, against LoCoMo's session_summary, summaries)."""
    obs = ctx.observations(ids)
    ours: dict[tuple[str, int], list[str]] = {}
    theirs: dict[tuple[str, int], list[str]] = {}
    n = 0
    for sid in sorted(ids):
        rows = [m for m in ctx.dump["agents"][sid].get("derived", []) if m["kind"] == "summary"]
        n += len(rows)
        ours |= by_session(rows, sid, lambda m: summary_sentences(m["text"]))
        for session, text in ctx.notes[sid].summaries.items():
            theirs[(sid, session)] = [s for s in _SENTENCE.split(text) if s.strip()]
    return judge_all(ctx.emb, obs, ours, ctx.speakers), judge_all(ctx.emb, obs, theirs, ctx.speakers), n


def vocabulary(ctx: Context, sid: str) -> tuple[set[str], set[str]]:
    """(the conversation's whole words, lower-case; the prefixes and stems of its words)."""
    words = {w for content in ctx.messages[sid].values() for w in re.findall(r"[a-z]+", content.lower())}
    near = {w[:i] for w in words for i in range(4, len(w))} | {tokens.stem_word(w) for w in words}
    return words, near - words


def stems_in(text: str, words: set[str], near: set[str]) -> list[str]:
    """Month and weekday names are left out: the product writes dates no message said ("6 March
    2023: ..."), and "march" is a word even where it is also the stem of "marched". So is the
    third person of a word of the conversation: an item told in its speaker's name says "Calvin
    works" where he said "I work" ("works" is also a prefix of "workshop")."""
    found = re.findall(r"[a-z]+", text.lower())
    return [
        t
        for t in found
        if len(t) >= 4
        and t not in words
        and t in near
        and t not in _MONTHS
        and t not in _DAYS
        and not _inflected(t, words)
    ]


def _inflected(token: str, words: set[str]) -> bool:
    """token is a word of the conversation with -s, -es or -ies (for -y) added."""
    return (
        token[:-1] in words
        or token.endswith("es")
        and token[:-2] in words
        or (token.endswith("ies") and token[:-3] + "y" in words)
    )


def user_texts(ctx: Context, sid: str) -> dict[str, list[str]]:
    agent = ctx.dump["agents"][sid]
    derived = agent.get("derived", [])
    return {
        "items": [m["text"] for m in agent.get("after", agent["before"]) if m["kind"] in REFLECTED],
        "summaries": [m["text"] for m in derived if m["kind"] == "summary"],
        "insights": [m["text"] for m in derived if m["kind"] == "insight"],
        "conclusions": [m["text"] for m in derived if m["kind"] == "conclusion"],
        "profile": agent.get("profile", []),
    }


def matcher_agreement(ctx: Context) -> tuple[int, int, Counter[str]]:
    """(pairs, pairs where the frozen matcher agrees with the hand judgement, confusion)."""
    rows = load_jsonl("matcher_check.jsonl")
    agree, conf = 0, Counter[str]()
    ctx.emb.vectors([t for r in rows for t in (r["observation"], r["item"])])
    for r in rows:
        v = ctx.emb.vectors([r["observation"], r["item"]])
        cos = float(v[0] @ v[1])
        said = cos >= COSINE and bool(key_match(r["observation"], r["item"], frozenset(r["speakers"])))
        agree += said == bool(r["judge"])
        conf[f"matcher {'yes' if said else 'no'}, judge {'yes' if r['judge'] else 'no'}"] += 1
    return len(rows), agree, conf


# --- kinds (no server) ---------------------------------------------------------------------------


def reflect_kind(text: str, embedder: Any) -> tuple[str, int]:
    """(the kind of the first item, items) of the offline reflector on a one-message episode, as
    the write keeps them (its items weighed against the kinds' examples by their vectors,
    memworker.reflection.settle); "smalltalk" when it keeps nothing."""
    from memworker.reflection import Episode, OfflineReflector, settled

    got = settled(OfflineReflector().reflect(Episode(text, [{"role": "user", "content": text}])), embedder).items
    return (got[0].kind if got else "smalltalk"), len(got)


def kinds_tables() -> list[str]:
    rows = load_jsonl("kinds.jsonl")
    if not rows:
        return ["(bench/data/written/kinds.jsonl missing)"]
    embedder = Embedder().model
    for r in rows:
        r["predicted"], r["items"] = reflect_kind(r["text"], embedder)
    table = []
    for split in ("dev", "test"):
        for source in (*sorted({r["source"] for r in rows}), "all"):
            part = [r for r in rows if r["split"] == split and source in ("all", r["source"])]
            if not part:
                continue
            small = [r for r in part if r["label"] == "smalltalk"]
            table.append(
                [
                    split,
                    source,
                    len(part),
                    pct(sum(r["predicted"] == r["label"] for r in part), len(part)),
                    pct(sum(r["items"] > 0 for r in small), len(small)),
                ]
            )
    out = [md_table(["split", "source", "sentences", "kind right", "small talk that gave an item"], table), ""]
    labels = [*KIND_LABELS, "conclusion"]
    conf = Counter((r["label"], r["predicted"]) for r in rows)
    out += [
        "Confusion, both splits (rows: label; columns: the reflector's first item, smalltalk = no item):",
        "",
        md_table(["label \\ got", *labels], [[lab, *(conf[(lab, g)] or "" for g in labels)] for lab in KIND_LABELS]),
    ]
    return out


# --- the ceiling of picking sentences (no server) -----------------------------------------------


def reflected(convs: Sequence[Conversation], cap: Any, embedder: Any) -> dict[str, Any]:
    """A dump of the items the offline reflector keeps (reflection.settled, as the write keeps
    them) from each session, with `cap` in place of reflection.item_cap; in process."""
    from memworker import reflection
    from memworker.settings import Settings

    kept_cap, reflection.item_cap = reflection.item_cap, cap
    dump: dict[str, Any] = {"agents": {}}
    try:
        for conv in progress(convs, desc="reflecting", unit="conv"):
            rows = []
            for body, dias in zip(*episode_bodies(conv, "written", Settings().max_content_bytes), strict=True):
                result = reflection.OfflineReflector().reflect(reflection.Episode("", body["messages"]))
                for item in reflection.settled(result, embedder).items:
                    rows.append(
                        {"text": item.text, "kind": item.kind, "dia_ids": sorted({dias[m] for m in item.messages})}
                    )
            dump["agents"][conv.sample_id] = {"before": rows}
    finally:
        reflection.item_cap = kept_cap
    return dump


def sentence_ceiling(convs: Sequence[Conversation], notes: dict[str, Notes]) -> str:
    """Coverage by the items the write keeps beside every sentence the offline reflector reads as
    informative, with no cap on items (the most a write that picks sentences can state), and
    beside every message kept whole."""
    from memworker import reflection

    runs = (("the items the write keeps", reflection.item_cap), ("every informative sentence", lambda n: 1 << 30))
    emb = Embedder()  # one model and one cache of vectors for both runs
    rows = []
    for label, cap in runs:
        ctx = Context.build(list(convs), notes, reflected(convs, cap, emb.model), emb)
        for split, ids in splits_of(ctx.convs):
            _, by_items, by_turns = coverage(ctx, ids)
            rows.append([split, label, sum(len(ctx.items(sid)) for sid in ids), stated(by_items)])
            if label == runs[0][0]:
                rows.append([split, "every message whole", "-", stated(by_turns)])
    return md_table(["split", "items", "how many", "observations stated"], sorted(rows, key=lambda r: r[0]))


def stated(verdicts: list[Verdict]) -> str:
    return pct(sum(v.stated for v in verdicts), len(verdicts))


# --- the report ---------------------------------------------------------------------------------


def write_tables(ctx: Context) -> list[str]:
    labels = item_labels(ctx)
    cov, dist, prec, kinds = [], [], [], []
    for split, ids in splits_of(ctx.convs):
        obs, by_items, by_turns = coverage(ctx, ids)
        items = [(sid, m) for sid in sorted(ids) for m in ctx.items(sid)]
        cov.append(
            [
                split,
                len(obs),
                stated(by_items),
                stated(by_turns),
            ]
        )
        cp = [copied(ctx, sid, m) for sid, m in items]
        dist.append([split, len(items), pct(sum(w for w, _ in cp), len(items)), pct(sum(s for _, s in cp), len(items))])
        n, good, unlabelled = precision(ctx, ids, labels)
        prec.append([split, n, pct(good, n), unlabelled])
        count = Counter(m["kind"] for _, m in items)
        turns = sum(ctx.dump["agents"][sid]["turns"] for sid in ids)
        kinds.append([split, len(items), turns, *(count[k] for k in REFLECTED)])
    return [
        "## Coverage: LoCoMo observations some reflected item of the same session states",
        "",
        "Beside it, the same matcher against the session's own messages (what a write that kept every "
        "message could reach: the matcher's ceiling).",
        "",
        md_table(["split", "observations", "stated by an item", "stated by a message of the session"], cov),
        "",
        "## Distillation: items that copy their message (target: whole message copied <= 20 %)",
        "",
        md_table(["split", "items", "whole message copied", "a word-for-word span of the message"], dist),
        "",
        "## Precision over the labelled items (bench/data/written/item_labels.jsonl)",
        "",
        md_table(["split", "labelled items in this run", "worth remembering (label 1)", "unlabelled items"], prec),
        "",
        "## What was written (before sleep)",
        "",
        md_table(["split", "reflected items", "turn rows", *REFLECTED], kinds),
    ]


def sleep_tables(ctx: Context) -> list[str]:
    rows, stems, examples = [], [], []
    for split, ids in splits_of(ctx.convs):
        ours, theirs, n = summaries(ctx, ids)
        rows.append(
            [
                split,
                len(ours),
                n,
                stated(ours),
                stated(theirs),
            ]
        )
        per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for sid in sorted(ids):
            words, near = vocabulary(ctx, sid)
            for what, texts in user_texts(ctx, sid).items():
                for t in texts:
                    found = stems_in(t, words, near)
                    per[what][0] += 1
                    per[what][1] += bool(found)
                    if found and len(examples) < 12:
                        examples.append(f"- {split} {what}: {', '.join(sorted(set(found)))} in {t[:160]!r}")
        for what, (n_texts, bad) in per.items():
            stems.append([split, what, n_texts, pct(bad, n_texts)])
    return [
        "## Summaries after a sleep pass: a session's observations they state",
        "",
        "The same matcher over the sentences of the summaries of the session's episode (their "
        '"<date>: " head and "<speaker>: " marks taken off), beside the sentences of LoCoMo\'s own '
        "session_summary of that session.",
        "",
        md_table(
            [
                "split",
                "observations",
                "summaries written",
                "stated by memworker's summaries",
                "stated by LoCoMo's session_summary",
            ],
            rows,
        ),
        "",
        "## Word stems in user-facing texts (a token that is no word of the conversation but a prefix or stem of one)",
        "",
        md_table(["split", "what", "texts", "holding a stem"], stems),
        "",
        "Examples:",
        "",
        *(examples or ["- none"]),
    ]


def check_lines(ctx: Context) -> list[str]:
    n, agree, conf = matcher_agreement(ctx)
    if not n:
        return ["Matcher check: bench/data/written/matcher_check.jsonl missing."]
    return [
        "## The matcher against a hand check",
        "",
        f"{n} (observation, best item) pairs judged by hand (bench/data/written/matcher_check.jsonl): "
        f"the matcher agrees on {pct(agree, n)}; " + ", ".join(f"{k}: {v}" for k, v in sorted(conf.items())) + ".",
    ]


def measure(ctx: Context) -> str:
    convs, dump = ctx.convs, ctx.dump
    out = [
        "# What the reflective write and the sleep write keep, against people's notes",
        "",
        f"LoCoMo conversations {', '.join(str(c.index + 1) for c in convs)} (dev: 1-5, test: 6-10), each "
        "session one episode through the API of a default `memworker up` (offline reflector), one agent per "
        "conversation; how each figure is measured is in bench/written.py's docstring.",
        "",
        *write_tables(ctx),
        "",
    ]
    if any("derived" in a for a in dump["agents"].values()):
        out += [*sleep_tables(ctx), ""]
    out += [
        "## Kinds: the offline reflector on one-message episodes (bench/data/written/kinds.jsonl)",
        "",
        *kinds_tables(),
        "",
        *check_lines(ctx),
        "",
        "## Run",
        "",
        dump.get("note", ""),
        f"- episodes: {dump.get('episodes')}; ingest {dump['timings'].get('ingest_s', 0):.0f}s, "
        f"sleep passes {dump['timings'].get('sleep_s', 0):.0f}s",
    ]
    return "\n".join(out)


# --- label sheets (to extend the frozen labels by hand) -------------------------------------------


def write_sheets(ctx: Context, out: Path, pairs: int = 100, items: int = 320) -> None:
    """Unjudged rows for a person to label: (observation, best item) pairs for the matcher check,
    each with the matcher's verdict, and a sample of items with their source message; both
    picked by a hash of the text, half from dev and half from test."""
    out.mkdir(parents=True, exist_ok=True)
    check, sample = [], []
    for split, ids in splits_of(ctx.convs):
        obs, verdicts, _ = coverage(ctx, ids)
        ranked = sorted(zip(obs, verdicts, strict=True), key=lambda ov: hashlib.sha1(ov[0].text.encode()).hexdigest())
        for o, v in [ov for ov in ranked if ov[1].best][: pairs // 2]:
            check.append(
                {
                    "conv": o.conv,
                    "session": o.session,
                    "speakers": sorted(ctx.speakers[o.conv]),
                    "observation": o.text,
                    "item": v.best,
                    "cosine": round(v.cosine, 3),
                    "key": v.key,
                    "matcher": v.stated,
                    "judge": None,
                }
            )
        rows = [(sid, m) for sid in sorted(ids) for m in ctx.items(sid)]
        rows.sort(key=lambda r: hashlib.sha1(item_key(r[1]["text"], (r[1]["dia_ids"] or [""])[0]).encode()).hexdigest())
        for sid, m in rows[: items // 2]:
            dia = (m["dia_ids"] or [""])[0]
            sample.append(
                {
                    "text": m["text"],
                    "dia_id": dia,
                    "conv": sid,
                    "split": split,
                    "kind": m["kind"],
                    "message": ctx.messages[sid].get(dia, ""),
                    "label": None,
                }
            )
    (out / "matcher_check.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in check))
    (out / "item_labels.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in sample))
    print(f"label sheets written to {out}", flush=True)


# --- main ---------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", help='1-based conversation numbers, e.g. "1,3-5" (default: all 10)')
    parser.add_argument("--split", choices=("dev", "test", "all"), default="all", help="dev: 1-5, test: 6-10")
    parser.add_argument("--no-sleep", action="store_true", help="no sleep pass: no summary or stem figures of it")
    parser.add_argument("--timeout", type=float, default=3600, help="wait this long for the episodes to be stored")
    parser.add_argument("--dump", type=Path, help="keep what the run read (JSON) here")
    parser.add_argument("--from-dump", type=Path, help="measure a dump again, no server (its run note kept)")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--label-sheets", type=Path, help="also write unjudged label sheets to this folder")
    parser.add_argument(
        "--sentence-ceiling",
        action="store_true",
        help="no server: coverage by every sentence the offline reflector reads as informative (no cap on items)",
    )
    add_stack_args(parser)
    args = parser.parse_args()
    args.load_before = loadavg()
    chosen = pick(args.conversations, args.split)
    convs = [c for c in load(args.data, None) if c.index in chosen]
    if args.sentence_ceiling:
        print(sentence_ceiling(convs, load_notes(args.data, [c.sample_id for c in convs])), flush=True)
        return
    if args.from_dump:
        dump = json.loads(args.from_dump.read_text())
        convs = [c for c in convs if c.sample_id in dump["agents"]]
    else:
        dump = collect(args, convs)
        if args.dump:
            args.dump.write_text(json.dumps(dump))
            print(f"dump written to {args.dump}", flush=True)
    notes = load_notes(args.data, [c.sample_id for c in convs])
    ctx = Context.build(convs, notes, dump)
    if args.label_sheets:
        write_sheets(ctx, args.label_sheets)
    report = measure(ctx)
    print(report, flush=True)
    print(f"\nwritten {write_report('written.md', report)}")


if __name__ == "__main__":
    main()
