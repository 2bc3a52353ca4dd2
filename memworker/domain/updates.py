"""Knowledge updates: when a new statement says the opposite of a live memory, it is a
change of what is true, never a confirmation (dedup) or a near-duplicate (merge). Pure and
lexical, like memworker.domain.rules (which asks `change` besides its own contradiction
rule): with no LLM in the loop it must be deterministic, and it must not mistake a true
paraphrase for an update. Three shapes:

- swap: the same words with two parts exchanged across a word that orders them ("email
  over phone" / "phone over email", "by phone, never by email" / "by email, never by
  phone", "Alice reports to Bob" / "Bob reports to Alice"). Parts exchanged across nothing
  or across "and"/"or" are a list or a moved phrase ("Python and Go" / "Go and Python",
  "on Mondays the team meets" / "the team meets on Mondays"): the same meaning.
- negation: the same content words, one of the two negated ("does not want weekly
  reports" / "wants weekly reports").
- value: the same sentence with a number, date, month, weekday or proper name (a place, a
  person, a plan) changed after a verb or preposition that introduces a value ("is on
  March 3" / "is on March 5", "plan is Enterprise" / "plan is Starter"). A changed word
  before any such anchor changes what the sentence is about ("Ticket 4411 is ..." /
  "Ticket 4412 is ..."): two facts, not an update.

A fourth reading, revision() below, takes a change said in other words than the old
statement ("Monitoring moved over to Grafana" / "We use Datadog for monitoring"), and apart()
keeps what only looks alike. See docs/subjects.md ("Knowledge updates"); the rates are
measured by bench/knowledge_updates.py (cases written apart from these rules) and
bench/knowledge_update_pairs.py (tests/data/knowledge_updates.jsonl)."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from memworker.domain import statements, tokens

_TOKEN = re.compile(r"\d+(?:[.:/,-]\d+)*[A-Za-z%]*|[^\W_]+")
_NEGATIONS = frozenset({"not", "no", "never", "cannot", "nobody", "nothing", "neither", "nor"})
# Adverbs that change how a thing is said, not what ("now uses", "officially uses"); the
# contradiction rule (memworker.domain.rules) drops the same words.
FILLERS = frozenset(
    {
        "now",
        "currently",
        "still",
        "already",
        "officially",
        "definitely",
        "certainly",
        "actually",
        "really",
        "also",
        "just",
        "recently",
        "indeed",
        "always",
    }
)
# Words that carry no content of their own here: articles, auxiliaries of a negation ("does
# not use"), and the fillers.
_SKIP = FILLERS | {"a", "an", "the", "do", "does", "did", "anymore", "longer"}  # "no longer uses": not "uses"
# Between two exchanged parts, only these leave the meaning alone (a list).
_SYMMETRIC = frozenset({"and", "or", "plus", "as", "well", "both", "either"})
# Words after which a changed number, date or name is a changed value.
_ANCHORS = frozenset(
    {
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "prefer",
        "preferred",
        "live",
        "lived",
        "located",
        "based",
        "hosted",
        "deployed",
        "called",
        "named",
        "scheduled",
        "moved",
        "move",
        "switched",
        "changed",
        "became",
        "become",
        "equal",
        "set",
        "target",
        "run",
        "use",
        "using",
        "cost",
        "require",
        "has",
        "have",
        "had",
        "need",
        "take",
        "start",
        "begin",
        "end",
        "expire",
        "due",
        "on",
        "at",
        "in",
        "to",
        "from",
        "until",
        "by",
        "for",
        "pay",
        "paid",
        "charge",
        "charged",
        "earn",
        "owe",
        "weigh",
        "last",
    }
)
_CALENDAR = frozenset(
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec "
    "monday tuesday wednesday thursday friday saturday sunday mondays tuesdays wednesdays "
    "thursdays fridays saturdays sundays today tomorrow yesterday morning afternoon evening".split()
)
# Negations whose first half is a word of its own: "cannot share" is "can" + "not share".
_EXPANDED = {"cannot": "can not", "can't": "can not", "won't": "will not", "shan't": "shall not"}
_CONTRACTIONS = re.compile(r"\b(?:cannot|can't|won't|shan't)\b", re.I)
_MAX_VALUE_WORDS = 4  # a changed value: at most a few words ("New York", "March 3")


@dataclass(frozen=True)
class _Word:
    form: str  # case-folded and lightly stemmed: what is compared
    proper: bool  # capitalised where it stands, not as the sentence's first word
    value: bool  # a number, a date word, or a proper name


def _stem(word: str) -> str:
    """A plural or third-person -s dropped ('prefers' ~ 'prefer'), nothing more."""
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


_NOT = _Word("\N{NOT SIGN}", proper=False, value=False)  # every negation word reads as one


@lru_cache(maxsize=16_384)
def _parse(text: str) -> tuple[_Word, ...]:
    """The words that carry content, negations as _NOT (they order things too: 'phone,
    never email')."""
    norm = unicodedata.normalize("NFKC", text).replace("\N{RIGHT SINGLE QUOTATION MARK}", "'")
    norm = _CONTRACTIONS.sub(lambda m: _EXPANDED[m.group(0).casefold()], norm)
    norm = re.sub(r"n't\b", " not", norm, flags=re.I)
    words: list[_Word] = []
    for i, raw in enumerate(_TOKEN.findall(norm)):
        folded = raw.casefold()
        if folded in _NEGATIONS:
            words.append(_NOT)
            continue
        if folded in _SKIP:
            continue
        proper = i > 0 and raw[:1].isupper()
        value = any(c.isdigit() for c in folded) or folded in _CALENDAR or proper
        words.append(_Word(_stem(folded), proper, value))
    return tuple(words)


def _forms(words: tuple[_Word, ...]) -> tuple[str, ...]:
    return tuple(w.form for w in words)


def change(older: str, newer: str) -> str | None:
    """How newer says the opposite of older: 'swap', 'negation', 'value', or None (the
    same thing, or two unrelated things)."""
    words_a, words_b = _parse(older), _parse(newer)
    a, b = _forms(words_a), _forms(words_b)
    core_a, core_b = [w for w in a if w != _NOT.form], [w for w in b if w != _NOT.form]
    if not core_a or not core_b:
        return None
    if (len(a) - len(core_a)) % 2 != (len(b) - len(core_b)) % 2:
        return "negation" if core_a == core_b else None
    if a == b:
        return None
    if sorted(a) == sorted(b):
        return "swap" if _moved(a, b) else None
    if not _value_changed(words_a, words_b):
        return None
    said_a, said_b = statements.parse(older), statements.parse(newer)
    return None if _listing(said_a, said_b) and not _says_changed(said_b) else "value"


# Words that name no thing and no relation of their own: the present copula, politeness, and
# the place words "in"/"on"/"at"/"of" ("plan is Enterprise" / "is on the
# Enterprise plan"). One text may add them; two texts that each have one the other lacks ("in
# the box" / "on the box") say different things. Direction words ("to", "from", "for", "by")
# are content: "the flight is to Paris" / "from Paris" are two facts.
_LIGHT = frozenset({"is", "are", "be", "please", "kindly", "thanks", "in", "on", "at", "of"})


def restates(older: str, newer: str) -> bool:
    """newer says what older says in other words: the same content words (case-folded, -s
    stemmed, fillers such as "now", "still", "always" left out, every negation word read as
    one, so "does not use" ~ "never uses"), nothing added and nothing dropped, and what few
    light words differ are added by one text only. Word order is not compared here: whether a
    reordering exchanged two roles is change()'s question, asked beside this one."""
    a = {w for w in _forms(_parse(older)) if w != "s"}  # "the customer's plan" ~ "the customer plan"
    b = {w for w in _forms(_parse(newer)) if w != "s"}
    content_a, content_b = a - _LIGHT, b - _LIGHT
    if not content_a or content_a != content_b:
        return False
    light_a, light_b = a & _LIGHT, b & _LIGHT
    return light_a <= light_b or light_b <= light_a


# Words that place a statement in the past: "the former account manager is Priya" and "the
# account manager is Priya", "was on the Enterprise plan" and "is on ...", are two facts
# however close their words and vectors.
_PAST = frozenset({"was", "were", "had", "former", "formerly", "previou", "previously", "ex", "used", "past"})


def timed_apart(older: str, newer: str) -> bool:
    """One text says the thing was (past tense, "former", "previously"), the other that it
    is: never a confirmation of each other, nor a change of value (both can be true)."""
    a, b = set(_forms(_parse(older))), set(_forms(_parse(newer)))
    return a & _PAST != b & _PAST


def reordered(older: str, newer: str) -> bool:
    """The same words in another order that says the same thing: a list reordered or a
    phrase moved ('Python and Go' / 'Go and Python'), not parts exchanged across a word that
    orders them (that is a 'swap')."""
    a, b = _forms(_parse(older)), _forms(_parse(newer))
    return a != b and sorted(a) == sorted(b) and not _moved(a, b)


# Words that bear on the word after them: a negation or "only" moved onto another word changes
# what is said ("does not use Slack but uses Teams" / "uses Slack but does not use Teams",
# "only admins can delete" / "admins can only delete") though every word is still there.
_SCOPED = frozenset({_NOT.form, "only"})


def _fused(words: tuple[str, ...]) -> tuple[str, ...]:
    """The words with each scoped word joined to the word it bears on (the next one)."""
    out: list[str] = []
    carry = ""
    for w in words:
        if w in _SCOPED:
            carry += w + " "
            continue
        out.append(carry + w)
        carry = ""
    return (*out, carry.strip()) if carry else tuple(out)


def _moved(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """The same words, reordered so that they say something else: two parts exchanged across
    a word that orders them, or a negation or "only" now bearing on another word (also when
    that exchanges two parts once each is joined to the word it bears on)."""
    fa, fb = _fused(a), _fused(b)
    return _swapped(a, b) or sorted(fa) != sorted(fb) or _swapped(fa, fb)


def _trimmed(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[int, int]:
    """(common prefix length, common suffix length) of two sequences, not overlapping."""
    p = 0
    while p < min(len(a), len(b)) and a[p] == b[p]:
        p += 1
    s = 0
    while s < min(len(a), len(b)) - p and a[-1 - s] == b[-1 - s]:
        s += 1
    return p, s


def _swapped(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """b is a with two parts X and Y exchanged (P X M Y S -> P Y M X S) across a middle M
    that orders them: not empty, and not only list words."""
    p, s = _trimmed(a, b)
    inner_a, inner_b = a[p : len(a) - s], b[p : len(b) - s]
    n = len(inner_a)
    for lx in range(1, n):
        for ly in range(1, n - lx + 1):
            x, y, m = inner_a[:lx], inner_a[n - ly :], inner_a[lx : n - ly]
            if inner_b == y + m + x and x != y:
                return any(w not in _SYMMETRIC for w in m)
    return False


def _value_changed(words_a: tuple[_Word, ...], words_b: tuple[_Word, ...]) -> bool:
    """One stretch of value words replaced by another after an anchor; with equal lengths,
    the words between changed values may stay ('Enterprise with 40 seats' / 'Starter with
    3 seats')."""
    a, b = _forms(words_a), _forms(words_b)
    p, s = _trimmed(a, b)
    if not any(w in _ANCHORS for w in a[:p]):
        return False  # what changed is what the sentence is about, or nothing anchors a value
    mid_a, mid_b = words_a[p : len(a) - s], words_b[p : len(b) - s]
    if not mid_a or not mid_b:
        return False  # one adds words the other lacks: more detail, not a different value
    if len(mid_a) == len(mid_b):
        changed = [(x, y) for x, y in zip(mid_a, mid_b, strict=True) if x.form != y.form]
        return len(changed) <= _MAX_VALUE_WORDS and all(x.value and y.value for x, y in changed)
    return (
        max(len(mid_a), len(mid_b)) <= _MAX_VALUE_WORDS and all(w.value for w in mid_a) and all(w.value for w in mid_b)
    )


# --- everyday updates ---------------------------------------------------------------------------
#
# People rarely restate a fact in the same words when it changes: "Our on-call number is
# 555-0134" becomes "New on-call number: 555-0188", "We use Datadog for monitoring" becomes
# "Monitoring moved over to Grafana". revision() reads both as statements (memworker.domain.statements)
# and calls the newer an update when it speaks of the same subject and attribute and gives it
# another value; it stays silent for what looks alike but is also true: another subject, an
# addition, a plan, a question, a statement of what was.

_MIN_SHARED = 0.5  # of the shorter statement's attribute words, for a change said in other words
_MAX_RESTATED = 2  # words that may differ on each side of a value said in plain words


_CLAUSE = re.compile(
    r"\s*(?:[,;()?!]|(?<=\.)\s|\s[\u2013\u2014-]\s|\b(?:so|but|because|and then|since|which|while)\b)\s*", re.I
)
_MIN_CLAUSE_WORDS = 3
# A statement of state names a thing, what about it and its value in a few words. Past this
# many terms (tokens.tokenize: stop words out) a sentence states several things, and two of them
# on one topic share attribute words and differ in some value by chance: the rule's evidence
# no longer says the same thing changed. Measured on the dev updates (all but 2 of the compared
# statements an update was found in have under 10) against the sentences of real long
# conversations, where most of the changes found in longer ones were two different things.
_MAX_STATEMENT_TERMS = 10
_MAX_CLAUSED_TERMS = 12


# A subject that only points back ("that", "this", "it"): the statement is about what was just
# said, which the rules cannot see, so it revises no memory.
_POINTERS = frozenset("it this that these those which".split())


@lru_cache(maxsize=16_384)
def _terms(text: str) -> int:
    """How many terms a statement has (tokens.tokenize): every clause pair a revision judges asks
    again of the same few texts."""
    return len(tokens.tokenize(text))


def _pointing(s: statements.Statement) -> bool:
    subject = [w.raw for w in s.words[: s.verb] if w.raw.isalpha()]
    return bool(subject) and all(  # "IT fixed the printer": a department, not a pointer
        w.casefold() in _POINTERS and not w.isupper() or w.casefold() in ("but", "and", "so") for w in subject
    )


def clauses(text: str) -> list[str]:
    """The statement, then its clauses when it has several ("Priya started at Adyen, she left
    Stripe in January"): an update is often one clause of a longer sentence."""
    parts = [p for p in _CLAUSE.split(text) if len(p.split()) >= _MIN_CLAUSE_WORDS]
    return [text, *parts] if len(parts) > 1 else [text]


def revision(older: str, newer: str) -> str | None:
    """How newer, or one of its clauses, revises older or one of its clauses ('replaced',
    'retracted', 'moved', 'value', 'restated value'); None when none does."""
    whole = statements.parse(newer)
    if whole.question or whole.history and not whole.now:
        return None  # a question, or what was ("when we moved in, rent was 950"), in any clause
    # clause against clause only in short sentences: a long one's clauses are its many
    # statements, and some two of them on one topic differ by chance
    long = max(_terms(older), _terms(newer)) > _MAX_CLAUSED_TERMS
    for a in clauses(older):
        for b in clauses(newer):
            if a is not older and b is not newer and long:
                continue
            how = _revision(a, b)
            if how is not None:
                return how
    return None


def _revision(older: str, newer: str) -> str | None:
    if apart(older, newer) or max(_terms(older), _terms(newer)) > _MAX_STATEMENT_TERMS:
        return None
    a, b = statements.parse(older), statements.parse(newer)
    if _pointing(b):
        return None  # "that didn't work either", "this is the right approach": of what was just said
    if a.verb >= len(a.words) or b.verb >= len(b.words):
        return None  # no verb: which words name the thing and which its value is not known
    attr_a, attr_b = a.content(generic=False), b.content(generic=False)
    # what both speak of: their attribute words and the names both use ("the API")
    shared = attr_a & attr_b | {w.form for w in a.words if w.name or w.value and not w.literal} & b.forms
    alike = a.content() - attr_a == b.content() - attr_b or not (a.content() ^ b.content()) - (attr_a ^ attr_b)
    new_values, old_values = b.named - a.forms, a.named - b.forms
    # newer names older's value as the one given up: "switched from Jenkins", "no longer Slack"
    given_up = (b.olds - a.olds) & a.named if b.change or b.negated else frozenset()
    if given_up and (new_values or b.negated or attr_b - attr_a):
        return "replaced"
    if b.negated and not a.negated:
        if _unsure(b):
            return None  # "I'm not sure this is right" doubts; it retracts nothing
        # "We no longer use Jenkins" retracts "We use Jenkins for CI" when it says nothing else
        return "retracted" if _covers(b, a) and (b.olds - a.olds) & (a.named | a.objects) else None
    if _same_subject(a, b) and _moved_on(b) and _placed(a) and not (a.objects & b.objects):
        return "moved"  # "Raj moved over to security engineering" / "Raj sits with the SRE team"
    if not shared and not (attr_a == attr_b == frozenset() and alike):
        return None
    overlap = len(shared) / max(1, min(len(attr_a | a.named - old_values), len(attr_b | b.named - new_values)))
    if (
        new_values
        and old_values
        and not (a.negated and b.negated)  # two things that are not: "haven't been to X" / "to Y"
        and not (_listing(a, b) and not _says_changed(b))
        and _kinds(new_values, b) == _kinds(old_values, a)  # a number for a number, a name for a name
        and (
            overlap >= _MIN_SHARED
            and (_says_changed(b) or _kinds(new_values, b) in ("literal", "status"))
            or shared
            and _says_changed(b)
        )
    ):
        return "value"
    # another value said in plain words ("now prefers phone" / "prefers email"): the two say
    # nearly the same, only a word or two differs on each side
    if (
        _says_changed(b)
        and overlap >= _MIN_SHARED
        and len(shared) >= 2
        and 0 < len((attr_b - attr_a) | new_values) <= _MAX_RESTATED
        and 0 < len((attr_a - attr_b) | old_values) <= _MAX_RESTATED
        and not _moves_another(b, a)
    ):
        return "restated value"
    return None


_CODE = re.compile(r"^(?=.*[a-z])(?=.*\d)[a-z0-9-]+$")
_UNIT = re.compile(r"^\d+(?:st|nd|rd|th|am|pm|k|m|h|s|x|gb|mb|ms|kg|km|%)$")


def codes_changed(older: str, newer: str) -> bool:
    """What differs between the two is an identifier ("INV2024001" / "INV2024002", "OPS-4411"
    / "OPS-4412"): as likely another thing of the same kind as the same thing changed, so
    the rules are unsure."""
    a, b = statements.parse(older), statements.parse(newer)
    differ = (a.forms - b.forms) | (b.forms - a.forms)
    literals = {w.form for w in (*a.words, *b.words) if w.literal and w.form in differ}
    return bool(literals) and all(_CODE.match(f) and not _UNIT.match(f) for f in literals)


def told_change(older: str, newer: str) -> str | None:
    """revision(), for a newer statement that says in so many words that something changed
    ("moved to", "slipped to", "switched"): the one way an event revises a fact or another
    event (a dated event beside another is history, both true)."""
    return revision(older, newer) if _says_changed(statements.parse(newer)) else None


def apart(older: str, newer: str) -> bool:
    """Whatever their words, the two can both be true: one is a question, a plan beside a
    fact, an addition ("we also use Redis"), what was beside what is ("in 2023 we used
    Jenkins"), about another subject, or differs from the other in two places at once."""
    a, b = statements.parse(older), statements.parse(newer)
    if a.question or b.question or a.plan != b.plan or b.addition and not b.olds:
        return True
    if a.history or b.history and not b.now:
        return True  # what was beside what is: both true
    return _other_subject(a, b) or _slots(a, b) > 1 and _slots(b, a) > 1


def _other_subject(a: statements.Statement, b: statements.Statement) -> bool:
    """The two statements are about different things: their subjects name different values
    ("Alice's office" / "Bob's office", "customer in Europe" / "in Asia"), newer's subject is
    what older said its subject relates to ("Jonas reports to Elena" / "Elena reports to
    ..."), each subject has a word the other statement never uses ("the frontend team" / "the
    backend team"), or newer's subject adds one without saying anything changed ("Sam" /
    "Sam's sister")."""
    if a.verb >= len(a.words) or b.verb >= len(b.words):
        return False  # no verb found: which words are the subject is not known
    named_a = {w.form for w in a.subject() if w.value}
    named_b = {w.form for w in b.subject() if w.value}
    if named_a and named_b and not named_a & named_b:
        return True
    said_b = {w.form for w in b.subject() if not w.light}
    said_of_a = {w.form for w in a.words[a.verb :] if w.value}
    said_a = {w.form for w in a.subject() if not w.light}
    if said_a and said_b and said_b <= said_of_a and not said_a & b.forms:
        return True
    # words of one subject the other statement never uses: another subject when each has
    # some ("the frontend team" / "the backend team", "Bob" / "Alice"), or when newer's name a
    # relation or someone, or are said without a word of change ("Sam" / "Sam's sister")
    only_a = {w for w in a.subject() if not w.light and w.form not in b.forms}
    only_b = {w for w in b.subject() if not w.light and w.form not in a.forms}
    marked_b = any(w.name or w.raw.casefold() in statements.RELATIONS for w in only_b)
    if not only_a:
        return marked_b or bool(only_b) and not b.change
    return bool(only_b)


_SHORT = 12  # words: a short statement with "now" or "new" in it is telling a change


def _says_changed(s: statements.Statement) -> bool:
    """It says something changed: in so many words ("switched", "no longer"), or, when it is
    short, with a word such as "now" or "new" (in a long chatty sentence those say little)."""
    return s.changed or s.change and len(s.words) <= _SHORT


# Words a negation doubts with rather than denies: "not sure", "don't know", "not clear".
_UNSURE = frozenset("sure certain know understand clear confident".split())


def _unsure(s: statements.Statement) -> bool:
    """Its negation is of the speaker's certainty ("I'm not sure if this is right", "I don't know
    whether we still use it"): a doubt, not a denial of what was said."""
    for i, w in enumerate(s.words):
        if w.raw.casefold() in _NEGATIONS:
            after = next((x for x in s.words[i + 1 :] if not x.light), None)
            if after is not None and after.raw.casefold() in _UNSURE:
                return True
    return False


def _listing(a: statements.Statement, b: statements.Statement) -> bool:
    """Both list things ("Flask 2.3.1 and SQLite" / "Python 3.11 and Flask 2.3.1") and newer keeps
    one of older's: another list of what is in use, not one value replaced (that takes saying
    so: "now Flask and Postgres")."""
    listed_a, listed_b = ({w.form for w in s.words[s.verb + 1 :]} & _SYMMETRIC for s in (a, b))
    kept = {w.form for w in a.words[a.verb + 1 :] if w.value} & {w.form for w in b.words[b.verb + 1 :] if w.value}
    return bool(listed_a and listed_b and kept)


def _same_subject(a: statements.Statement, b: statements.Statement) -> bool:
    """Both subjects say the same words of substance (none at all: "we", "I", an elided one)."""
    said_a = {w.form for w in a.subject() if not w.light}
    said_b = {w.form for w in b.subject() if not w.light}
    return said_a == said_b


def _kinds(forms: frozenset[str], s: statements.Statement) -> str:
    """What the given words of s are, by the most telling: a number, a status, a date or time,
    a name. Another number or status is a changed value however it is said; another name is
    one only when the statement says something changed (in a conversation, two sentences
    about one topic name many things that are all true)."""
    words = [(i, w) for i, w in enumerate(s.words) if w.form in forms]
    if any(w.literal and not _dated(s, i) for i, w in words):
        return "literal"
    if any(w.raw.casefold() in statements.STATUSES for _, w in words):
        return "status"
    return "time" if any(w.form in statements.CALENDAR_FORMS or _dated(s, i) for i, w in words) else "name"


_YEAR = re.compile(r"^(?:19|20)\d\d$")


def _dated(s: statements.Statement, i: int) -> bool:
    """The literal at i is part of a date ("March 2", "2 May", a year): a date changes a date,
    never a count ("52 sources" changes no "March 2")."""
    near = s.words[max(0, i - 1) : i + 2]
    return s.words[i].literal and (
        bool(_YEAR.match(s.words[i].raw)) or any(w.form in statements.CALENDAR_FORMS for w in near)
    )


def _moves_another(b: statements.Statement, a: statements.Statement) -> bool:
    """newer's subject moved something older never mentions ("Raj moved the retro to
    Thursday" says nothing of where Raj sits)."""
    if b.verb >= len(b.words) or b.words[b.verb].raw.casefold() not in statements.MOVES:
        return False
    moved = next((w for w in b.words[b.verb + 1 :] if not w.light), None)
    return moved is not None and b.words[b.verb + 1].form in _DETERMINERS and moved.form not in a.forms


_DETERMINERS = frozenset("the a an our my their his her your its this that".split())


# Verbs that say where someone or something is: what a move changes.
_PLACING = frozenset("is are am lives live stays stay sits sit works work based located hosted runs run".split())


def _placed(s: statements.Statement) -> bool:
    """It says where its subject is ("Raj sits with the SRE team", "I live in Lisbon")."""
    return s.verb < len(s.words) and s.words[s.verb].raw.casefold() in _PLACING


def _moved_on(s: statements.Statement) -> bool:
    """Its verb says its subject moved on, to a place or a value: "moved over to", "joined
    Globex" (not "moved the meeting")."""
    if s.verb >= len(s.words):
        return False
    verb = s.words[s.verb]
    after = s.words[s.verb + 1] if s.verb + 1 < len(s.words) else None
    return (
        verb.raw.casefold() in statements.MOVES
        and after is not None
        and (after.value or after.name or after.raw.casefold() in ("to", "over", "into", "back", "from"))
    )


def _slots(s: statements.Statement, other: statements.Statement) -> int:
    """How many separate stretches of names and values s has that other lacks."""
    runs, inside = 0, False
    for w in s.words:
        differs = (w.value or w.name) and w.form not in other.forms
        runs += differs and not inside
        inside = bool(differs) or (inside and w.light)
    return runs


def _covers(b: statements.Statement, a: statements.Statement) -> bool:
    """b's words of substance are all in a (values and most attribute words)."""
    vals = b.values
    attrs = b.content(generic=False)
    return (
        vals <= a.values
        and (not attrs or len(attrs & a.content(generic=False)) * 2 >= len(attrs))
        and bool(vals | attrs)
    )


# --- what never happened ---------------------------------------------------------------------------
#
# "I've never met Bryan at any film festival" beside "I got advice from Bryan at the film
# festival": the newer does not change the older (what happened stays happened), it says the
# older is false. The rules cannot tell which one is true; a person can.

_NEVER = re.compile(r"\b(?:i|we)(?:'ve| have|'d| had)?\s+never\s+([^,;.!?]+)", re.I)
_MIN_DENIED = 2  # terms of the denied clause the older must share


@lru_cache(maxsize=16_384)  # judge asks it before changed() asks it again of the same pair
def denied(older: str, newer: str) -> bool:
    """newer denies that what older, or one of its clauses, says of its speaker ever happened:
    a clause "I/we (have) never <did something>" whose terms the older clause shares (at least
    two, with every number it gives and one of its names if it names any), the older clause
    said of its speaker (its subject "I" or "we") and not a question, a plan or a denial."""
    m = _NEVER.search(newer)
    if m is None or _NEVER.search(older):
        return False
    never = statements.parse(m.group(1))
    terms = set(tokens.tokenize(m.group(1)))
    literals = {w.form for w in never.words if w.literal}
    names = {w.form for w in never.words if w.name and not w.literal}
    for part in clauses(older):
        said = statements.parse(part)
        if said.question or said.plan or said.negated or not _of_speaker(said):
            continue  # "can you help?", "I want to try it", "my sister tried it"
        if not literals <= said.forms or names and not names & said.forms:
            continue  # "never had an outage in the EU region" beside one in the US region
        if len(terms & set(tokens.tokenize(part))) >= _MIN_DENIED:
            return True
    return False


def _of_speaker(s: statements.Statement) -> bool:
    """Its subject is the speaker: "I", "we" (with nothing else of substance)."""
    subject = s.subject()
    return any(w.raw.casefold() in ("i", "we") for w in subject) and all(w.light for w in subject)
