"""One statement read for what it says about the world: which words are values (numbers,
dates, names, addresses), which part is its subject (the words before its verb), and how it
is said (a question, a plan, history, an addition, a change, a negation, which value it names
as the old one). Pure, lexical and deterministic: memworker.domain.updates compares two of these to
tell a knowledge update from two statements that are both true."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from memworker.domain import tokens

_TOKEN = re.compile(
    r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"  # an address
    r"|\bv(?=\d)"  # the v of a version ("v2.4"), dropped below
    r"|[$€£]?\+?\d+(?:[.:/,-]\d+)*(?:\s?(?:am|pm|k|m|%))?(?![\w])"  # a number, time, price, date
    r"|[^\W_]+(?:-[^\W_]+)+"  # a compound ("on-call", "in-progress")
    r"|[^\W_]+(?:['’][^\W_]+)?"
    r"|[:?]",
    re.I,
)
_NEGATIONS = frozenset({"not", "no", "never", "nobody", "nothing", "neither", "nor", "none"})
_CONTRACTED = {
    "can't": "can not",
    "cannot": "can not",
    "won't": "will not",
    "isn't": "is not",
    "aren't": "are not",
    "wasn't": "was not",
    "weren't": "were not",
    "doesn't": "does not",
    "don't": "do not",
    "didn't": "did not",
    "hasn't": "has not",
    "haven't": "have not",
    "it's": "it is",
    "that's": "that is",
    "we're": "we are",
    "they're": "they are",
    "i'm": "i am",
    "she's": "she is",
    "he's": "he is",
    "we've": "we have",
    "i've": "i have",
    "they've": "they have",
    "we'll": "we will",
    "i'll": "i will",
    "i'd": "i would",
    "we'd": "we would",
}
_CALENDAR = frozenset(
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday "
    "saturday sunday mondays tuesdays wednesdays thursdays fridays saturdays sundays weekday "
    "weekdays weekend weekends noon midnight morning mornings afternoon afternoons evening evenings "
    "night nights".split()
)
# Words a sentence often starts with that are not names ("Update: ...", "Our office ...").
# Numbers written as words are numbers too ("two days a week" / "four days a week").
_NUMBER_WORDS = frozenset(
    "one two three four five six seven eight nine ten eleven twelve fifteen twenty thirty forty fifty "
    "hundred thousand dozen half".split()
)
CALENDAR_FORMS = _CALENDAR  # dates and times: compared with dates and times, not with names
_STARTERS = frozenset(
    "update updated correction actually please just so also from starting as since after before "
    "heads fyi note btw ok okay quick good sorry hey hi hello now today tonight tomorrow yesterday "
    "going new our your their his her its my we i they she he it this that these those there here "
    "the a an all any every each some no not never scratch small minor reminder moving effective "
    "following per yes yeah well oh".split()
)
# Verbs after which the rest of the sentence is what is said of its subject. Base, -s and -ed
# forms of the verbs everyday facts are stated with; any other word ending in -ed after the
# subject counts too ("relocated", "rescheduled").
_VERBS = frozenset(
    "is are was were be been am 's has have had use uses used using work works worked live lives "
    "lived stay stays stayed prefer prefers preferred like likes liked love loves want wants wanted "
    "need needs needed handle handles handled own owns owned manage manages managed lead leads led "
    "run runs ran cost costs take takes took go goes went get gets got sit sits sat report reports "
    "reported start starts started begin begins began end ends ended meet meets met moved move moves "
    "switched switch switches changed change changes became become becomes is_now pay pays paid "
    "charge charges charged earn earns earned drive drives drove eat eats ate drink drinks drank "
    "speak speaks spoke weigh weighs call calls called email emails emailed reach reaches "
    "host hosts hosted ship ships shipped sell sells sold buy buys bought hold holds held "
    "keep keeps kept belong belongs belonged cover covers covered support supports supported "
    "runs_on lives_in is_in located based scheduled set sets due expires expire expired "
    "include includes included contain contains consists count counts counted rose fell grew "
    "went dropped raised lowered increased decreased cut doubled tripled halved bumped "
    "picked chose chosen decided opted settled hired joined left quit stopped dropped replaced "
    "upgraded downgraded migrated renamed relocated rescheduled postponed pushed delayed "
    "takes_over took_over goes_to go_to can could will would should must may might do does did came come "
    "comes give gives gave make makes made say says said tell tells told add adds added".split()
)
# How a statement says that something changed (a value replaced, raised, moved ...).
_CHANGE = frozenset(
    "now currently anymore longer instead switched switch switching moved moving changed change "
    "changing replaced replacing replace became become becomes update updated updating correction "
    "corrected actually migrated migrating upgraded downgraded renamed relocated rescheduled "
    "postponed pushed delayed raised lowered increased decreased cut bumped dropped doubled "
    "halved tripled rose fell promoted demoted transferred reassigned "
    "effective starting going forward henceforth lately nowadays days new newer latest revised "
    "scratch turns out slipped slid shifted passed reached hit grew climbed crossed topped exceeded "
    "fixed repaired broke retired decommissioned started joined left quit graduated hired resigned revised "
    "engaged married divorced deleted removed cancelled canceled ditched uninstalled".split()
)
_CHANGE_PHRASES = ("took over", "taken over", "handed over", "handed off", "moved over")
# Words that say the new thing is beside the old one, not instead of it.
# The words of change that say it in so many words.
_CHANGED = frozenset(
    "switched switch moved changed replaced instead anymore longer updated correction corrected migrated "
    "upgraded downgraded renamed relocated rescheduled postponed pushed delayed raised lowered increased "
    "decreased bumped slipped transferred reassigned promoted demoted revised".split()
)
_NOW = frozenset("now currently anymore longer nowadays days lately".split())
# Words that say the new thing is beside the old one, not instead of it (one more pet, one more
# office: "adopted a dog" keeps the cat).
_ADDITION = frozenset(
    "also too additionally addition another additional second extra besides adopted bought purchased "
    "acquired welcomed".split()
)
_ADDITION_PHRASES = ("as well", "in addition", "on top of", "along with", "plus we", "as a second")
# Words that say a thing may or is meant to happen, not that it is.
_PLAN = frozenset(
    "plan plans planning planned thinking considering consider might could maybe perhaps "
    "hope hoping hopefully want wants wanted wish intend intends intending "
    "exploring evaluating discussing proposed proposal idea ideas if whether".split()
)
# Words that set a statement in the past, beside what is true now.
_HISTORY = frozenset("formerly former previously ex ago originally initially earlier".split())
_HISTORY_YEAR = re.compile(r"\b(?:in|during|until|till|through) (?:19|20)\d\d\b", re.I)
_HISTORY_PHRASES = (
    "used to",
    "in the past",
    "back in",
    "at the time",
    "years ago",
    "when i was",
    "last year",
    "when i joined",
    "when we moved",
    "when we started",
    "when i started",
    "before going",
    "before that",
    "before i",
    "before we",
)
# Words after which the value named is the old one ("from Jenkins to ...", "instead of Slack").
_OLD_MARKERS = frozenset(
    "from instead replaced replacing replace than longer anymore not no never deleted dropped left quit "
    "stopped cancelled canceled removed ditched sold lost uninstalled".split()
)
# Verbs of someone or something moving on ("Raj moved over to security", "Ana joined Globex").
MOVES = frozenset("moved move moves relocated transferred switched joined".split())
_CUE_OPENERS = frozenset("update correction actually scratch change".split())
_REQUEST = re.compile(r"^\s*(?:please\s+)?(?:can|could|would|will)\s+(?:you|we)\s+(?:please\s+)?\w+", re.I)
# Nouns that name someone (or something) by their relation to another: "Sam's sister" is not Sam.
RELATIONS = frozenset(
    "sister brother mother father mom mum dad parent parents wife husband partner son daughter kid kids "
    "child children friend boss manager colleague coworker neighbour neighbor roommate assistant cousin "
    "uncle aunt grandma grandpa grandmother grandfather girlfriend boyfriend fiance fiancee dog cat "
    "team deputy replacement family".split()
)
_PRONOUNS = frozenset("it she he they we i you this that which who someone everyone".split())
_DETERMINERS = frozenset("the our my their his her your its".split())
_GENERIC_VERBS = frozenset(
    "use used using have has had get got do does did make made go went take took be is are was were "
    "am been can could will would should must may might need needs want wants keep kept".split()
)
# States a thing is in: values of a status, compared like names and numbers.
_STATUSES = frozenset(
    "open closed done blocked resolved pending active inactive paused cancelled canceled live shipped "
    "delayed approved rejected merged deprecated available unavailable complete completed finished "
    "enabled disabled online offline on-track at-risk in-progress on-hold off-track draft archived "
    "postponed scheduled confirmed tentative full empty vegan vegetarian remote hybrid onsite on-site "
    "single married engaged divorced retired unemployed employed down broken fixed working back-up "
    "back-online signed under-review in-negotiation".split()
)
STATUSES = _STATUSES  # states a thing is in: one replaces another
_PHRASES = re.compile(r"\b(on|at|in|off|back|under) (track|risk|progress|hold|up|online|review|negotiation)\b", re.I)
# Words that say how, not what: "just", "really", "finally".
_FILLERS = frozenset("just really still already simply basically finally officially definitely truly".split())
_LIGHT = tokens.STOP_WORDS | _CHANGE | _NEGATIONS | _ADDITION | _FILLERS | {":", "?", "v", "please", "pls", "kindly"}
_PREPOSITIONS = frozenset("on in at to from for with by within about over under after before per into".split())
_QUESTION_START = frozenset(
    "who what when where which why how is are do does did can could will would should has have".split()
)


@dataclass(frozen=True)
class Word:
    raw: str  # as written
    form: str  # case-folded, stemmed: what is compared
    value: bool  # a number, date, time, address or name
    light: bool  # a stop word, cue word, negation or punctuation: no content of its own
    name: bool  # capitalised (a sentence's first word too, unless a common opener)
    literal: bool  # a number, date, time or address (written with digits or an @)


@dataclass(frozen=True)
class Statement:
    words: tuple[Word, ...]
    verb: int  # index of the first verb (len(words) when none): the subject is what comes before
    question: bool
    negated: bool
    plan: bool
    history: bool
    addition: bool
    change: bool  # says that something changed (a cue word)
    changed: bool  # ... in so many words ("switched", "moved", "no longer"), not only "now" or "new"
    now: bool  # says what is true now ("now", "these days", "no longer")
    olds: frozenset[str]  # forms named as the old value ("from X", "instead of X", "no longer X")

    @property
    def forms(self) -> frozenset[str]:
        return frozenset(w.form for w in self.words)

    @property
    def values(self) -> frozenset[str]:
        return frozenset(w.form for w in self.words if w.value)

    @property
    def named(self) -> frozenset[str]:
        """The forms of its values and capitalised words."""
        return frozenset(w.form for w in self.words if w.value or w.name)

    @property
    def objects(self) -> frozenset[str]:
        """The content words after its verb that are not verbs themselves: what is said of
        the subject ("Jenkins" and "CI" in "We use Jenkins for CI")."""
        return frozenset(w.form for w in self.words[self.verb + 1 :] if not w.light and w.raw.casefold() not in _VERBS)

    def content(self, *, generic: bool = True) -> frozenset[str]:
        """The words that carry meaning: no stop words, cue words, negations or values
        (nor the most generic verbs, with generic=False)."""
        return frozenset(
            w.form
            for w in self.words
            if not w.value and not w.light and (generic or w.raw.casefold() not in _GENERIC_VERBS)
        )

    def subject(self) -> tuple[Word, ...]:
        return self.words[: self.verb]


# An opening word or two that announces the sentence ("Heads up, ...", "FYI: ...").
_OPENER = re.compile(
    r"^\s*(?:(?:heads[- ]up|fyi|psa|btw|note|reminder|quick (?:update|note)|update)"
    r"(?:,? (?:team|all|everyone|folks|people|guys))?|small change|correction|"
    r"ok so|okay so|so|well|actually|scratch that|oh)\s*[,:!.\-\u2013\u2014]+\s*",
    re.I,
)


# A sentence that opens with when its news takes effect ("As of Monday, ...", "Starting next
# week ...", "From 1 June ...") says what is now: the day is no part of its subject.
_DAY = "|".join(sorted(_CALENDAR))
_EFFECTIVE = re.compile(
    r"^\s*(?:as of|as from|starting(?: from| on)?|beginning|effective|from)\s+(?:(?:next|this|coming|the)\s+)?"
    rf"(?:(?:{_DAY}|today|tomorrow|tonight|now|week|month|year|quarter)\b(?:\s+(?:the\s+)?\d{{1,2}}(?:st|nd|rd|th)?\b)?"
    rf"|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_DAY})\b)(?:,?\s+\d{{4}})?\s*,?\s*",
    re.I,
)


# A name the sentence speaks to, not of: "Hey Maria, ...", "... awesome, Jon!"
_VOCATIVE = re.compile(
    r"^\s*(?:hey|hi|hello|thanks|thank you|sorry|yes|yeah|wow|oh|congrats)(?:\s+[A-Z]\w+)?\s*[,!.]+\s*"
    r"|,\s*[A-Z]\w+\s*(?=[.!?]*\s*$)",
    re.I,
)


def _normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).replace("\N{RIGHT SINGLE QUOTATION MARK}", "'")
    text = _VOCATIVE.sub(lambda m: "" if m.group(0).lstrip()[:1] != "," else "", text)
    text = _PHRASES.sub(lambda m: f"{m.group(1)}-{m.group(2)}", _EFFECTIVE.sub("now ", _OPENER.sub("", text)))
    text = re.sub(r"\bcannot\b", "can not", text, flags=re.I)
    return re.sub(r"\b\w+'\w+\b", lambda m: _CONTRACTED.get(m.group(0).casefold(), m.group(0)), text)


def _words(raws: list[str]) -> list[Word]:
    words: list[Word] = []
    for i, raw in enumerate(raws):
        folded = raw.casefold()
        initial = i == 0 or raws[i - 1] == ":"
        name = raw[:1].isupper() and folded not in _STARTERS and folded not in _PRONOUNS
        if name and initial:  # a first word is a name only when it reads as one
            name = (
                raw.endswith(("'s", "’s"))
                or raw.isupper()
                and len(raw) > 1
                or (i + 1 < len(raws) and raws[i + 1] in ("'s", "’s"))
            )
        literal = any(c.isdigit() for c in folded) or "@" in folded or folded in _NUMBER_WORDS
        # a capitalised first word may be a name or just the first word: compared, not a value
        value = literal or folded in _CALENDAR or folded in _STATUSES or (name and not initial)
        light = folded in _LIGHT and not name
        words.append(Word(raw, folded if literal or light else tokens.stem_word(folded), value, light, name, literal))
    return words


def _verb(words: list[Word], forms: list[str]) -> int:
    """Where the verb is (len(words) when none is found): a listed verb, an -ed word, or a
    colon; else a third-person -s after the subject; else the word before the first
    preposition that is not a value."""
    verb = next(
        (
            i
            for i, f in enumerate(forms)
            if (i > 0 or not words[0].name)  # "Bumped pool size to 50": the subject left unsaid
            and (i == 0 or forms[i - 1] not in _DETERMINERS | {"a", "an"})  # "my work number": not a verb
            and (f in _VERBS or f == ":" or (f.endswith("ed") and len(f) > 4 and not words[i].literal))
        ),
        None,
    )
    if verb is None:  # a verb not listed: a third-person -s after the subject ("the SLA requires")
        verb = next(
            (
                i
                for i, f in enumerate(forms)
                if i > 0
                and f.endswith("s")
                and not f.endswith("ss")
                and not words[i].value
                and (
                    words[i - 1].name or i > 1 and not words[i - 1].light and forms[i - 2] in _DETERMINERS | {"a", "an"}
                )
            ),
            None,
        )
    if verb is None:  # else the word before the first preposition ("deploys happen on")
        verb = next(
            (i - 1 for i, f in enumerate(forms) if i > 1 and f in _PREPOSITIONS and not words[i - 1].value),
            len(words),
        )
    return verb


@lru_cache(maxsize=16_384)
def parse(text: str) -> Statement:
    opened = _OPENER.match(text)
    norm = _normalise(text)
    words = _words(_TOKEN.findall(norm))
    forms = [w.raw.casefold() for w in words]
    joined = " " + " ".join(forms) + " "
    verb = _verb(words, forms)
    olds = frozenset(
        words[j].form
        for i, f in enumerate(forms)
        if f in _OLD_MARKERS
        for j in range(i + 1, min(i + 4, len(words)))
        if not words[j].light and forms[j] not in _OLD_MARKERS
    )
    question = (text.rstrip().endswith("?") or bool(forms) and forms[0] in _QUESTION_START and "?" in forms) and not (
        _REQUEST.match(norm)  # "Can you send it as a Sheet going forward?" asks for a change
    )
    return Statement(
        words=tuple(words),
        verb=_copula_subject(words, verb),
        question=question,
        negated=any(f in _NEGATIONS for f in forms),
        plan=any(f in _PLAN for f in forms)
        or "may" in (w.raw for w in words)
        or " going to " in joined
        and " now " not in joined,
        history=any(f in _HISTORY for f in forms)
        or any(f" {p} " in joined for p in _HISTORY_PHRASES)
        or bool(_HISTORY_YEAR.search(norm)),
        addition=any(f in _ADDITION for f in forms) or any(f" {p} " in joined for p in _ADDITION_PHRASES),
        now=any(f in _NOW for f in forms),
        changed=any(f in _CHANGED for f in forms) or " as of " in joined or bool(opened and _cued(opened.group(0))),
        change=any(f in _CHANGE for f in forms)
        or any(f" {p} " in joined for p in _CHANGE_PHRASES)
        or bool(opened and set(re.findall(r"[a-z]+", opened.group(0).casefold())) & _CUE_OPENERS),
        olds=olds,
    )


def _cued(opener: str) -> bool:
    return bool(set(re.findall(r"[a-z]+", opener.casefold())) & _CUE_OPENERS)


def _copula_subject(words: list[Word], verb: int) -> int:
    """'Bob is the on-call engineer' says who the on-call engineer is: its subject is the
    description after the copula, so the name before it is the value (subject empty)."""
    if (
        0 < verb < len(words) - 1
        and words[verb].form in ("is", "are")
        and words[verb + 1].form in _DETERMINERS
        and all(w.value or w.name for w in words[:verb])
    ):
        return 0
    return verb


_FIRST_PERSON = frozenset("i me my mine we us our ours myself ourselves".split())


def first_person(text: str) -> bool:
    """The statement speaks of its speaker ("I", "my", "we", "our"): who said it says whom it
    is about."""
    return any(w.raw.casefold() in _FIRST_PERSON for w in parse(text).words)


# "Caroline: I moved to Lyon." A name and a colon before a first- or second-person utterance
# is who said it, not what it is about; a heading ("Update:", "Onboarding PO: Aisha") is not.
_LABEL = re.compile(r"^([A-Z][\w.'-]*(?: [A-Z][\w.'-]*)?): +(?=\S)")
_HEADINGS = frozenset("update note correction fyi reminder summary edit ps re todo important warning heads".split())
_ADDRESSED = frozenset("i me my mine we us our ours you your yours".split())


def quoted(text: str) -> tuple[str | None, str]:
    """(the speaker a leading "Name: " label names, the utterance after it), or (None, text)
    when the text has no such label."""
    m = _LABEL.match(text)
    if not m or m.group(1).split()[0].casefold() in _HEADINGS:
        return None, text
    said = text[m.end() :]
    if not _ADDRESSED & {w.casefold() for w in re.findall(r"[A-Za-z]+", said)}:
        return None, text
    return m.group(1), said
