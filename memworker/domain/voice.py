"""A sentence told in its speaker's name: "I started a pottery class with my sister" said by
Caroline becomes "Caroline started a pottery class with Caroline's sister".

A memory outlives the message it came from and is read beside other people's: in a
conversation of several named people, "I" no longer says who. The offline reflector writes an
item this way when its message names its speaker (memworker.reflection); the turn keeps the
words as they were said. Pure and lexical: the first person's words are replaced ("I", "me",
"my", "mine", "myself" and the contractions of "I"), and the verb after "I" is put in the third
person when it is a present-tense verb ("I love" / "Caroline loves", "I don't" / "Caroline
doesn't"); "we" and "our" are left, since they do not say who else is meant."""

from __future__ import annotations

import re

# A speaker's name that reads as a person's name: one to three capitalised words ("Caroline",
# "Mary Ann"); an id or a handle ("user_42", "ops-bot") is left out, and the text keeps "I".
_PERSON = re.compile(r"^[A-Z][a-z]+(?:[ '-][A-Z][a-z]+){0,2}$")
# Words that may stand between "I" and its verb ("I really love", "I just got").
_ADVERBS = frozenset(
    "really also just still always never often usually actually definitely totally recently finally "
    "already sometimes even truly seriously kinda sorta absolutely honestly mostly rarely only "
    "personally genuinely literally basically certainly probably".split()
)
# Verbs whose form after "I" is also their form after "she" or "he".
_SAME = frozenset(
    "can could will would should might must may shall was were ought "
    # common irregular past tenses (a regular one ends in -ed)
    "went got saw made took had did felt found knew thought told gave came began brought bought built "
    "caught chose drew drove ate fell fought flew forgot forgave grew heard held hid hit hurt kept led "
    "left lent let lost meant met paid put quit ran read rode rang rose said sent set shot showed shut "
    "sang sank sat slept slid spent spoke split spread stood stole stuck struck swam swore taught tore "
    "threw understood woke wore won wrote became bent bet bit blew broke burnt cast cost crept cut dealt "
    "dug dove dreamt dwelt fed fled flung froze hung knelt laid lay leapt learnt lit overcame rid shook "
    "shone sought sold sped spun sprang stank strove swept swung upset wept withdrew wound".split()
)
_IRREGULAR = {"am": "is", "have": "has", "do": "does", "go": "goes", "be": "is"}
# A participle after "I'd": "I'd been" is "had been", "I'd love" is "would love".
_PARTICIPLES = frozenset("been gone done seen had got gotten known taken given made told thought never".split())
_CONTRACTED = {"m": "is", "ve": "has", "ll": "will"}
# "I" (or its contraction), then the adverbs after it and the one word after them.
_FIRST = re.compile(
    r"\b(I|i)(?:['\u2019](m|ve|d|ll)\b|\b(?![.-]\w))"
    rf"((?:\s+(?:{'|'.join(sorted(_ADVERBS))})\b)*(?:\s+(?![Ii]\b|[Ii]['\u2019])[A-Za-z'\u2019]+)?)"
)
# What comes right before "I" when it is one of two subjects: "Max and I", "my wife and I" (not
# "I love it and I adore": there "and" begins a clause).
_COMPOUND = re.compile(r"(?:\b[A-Z][a-z]+|\b[Mm]y \w+)\s+(?:and|&)\s+$")
_OBJECT = re.compile(r"\b(?:me|Me|myself|Myself)\b")
_POSSESSIVE = re.compile(r"\b(?:my|My|mine|Mine)\b")


def person(name: str | None) -> str | None:
    """The name a text can be told in, or None: a message's "name" that reads as a person's."""
    name = (name or "").strip()
    return name if _PERSON.match(name) else None


def told_by(text: str, name: str) -> str:
    """text, said by `name` (a person(): the caller checks), told in their name."""
    text = _FIRST.sub(lambda m: _subject(m, name, _COMPOUND.search(text, 0, m.start()) is not None), text)
    text = _POSSESSIVE.sub(f"{name}'s", text)
    return _OBJECT.sub(lambda m: "themself" if m.group(0).lower() == "myself" else name, text)


def as_said(text: str, name: str) -> str:
    """told_by() undone closely enough to judge what was said: the teller's name back to "I" and
    "my" (a verb keeps its -s, which the statement rules read past)."""
    text = re.sub(rf"\b{re.escape(name)}'s\b", "my", text)
    return re.sub(rf"\b{re.escape(name)}\b", "I", text)


def _subject(m: re.Match[str], name: str, compound: bool) -> str:
    """The subject "I" (m: _FIRST) as `name`, its verb in the third person unless "I" is one of
    several subjects ("Max and I love": the verb stays)."""
    contraction, rest = m.group(2), m.group(3)
    if contraction == "d":
        following = rest.split()
        return f"{name} {'had' if following and following[0].lower() in _PARTICIPLES else 'would'}{rest}"
    if contraction:
        return f"{name} {_CONTRACTED[contraction]}{rest}"
    if compound:
        return name + rest
    words = re.split(r"(\s+)", rest)  # ["", " ", "really", " ", "love", ...]
    for i in range(2, len(words), 2):
        word = words[i]
        if word.lower() in _ADVERBS:
            continue
        words[i] = _third(word)
        break
    return name + "".join(words)


def _third(verb: str) -> str:
    """The third person of a present-tense verb after "I" ("love" / "loves", "don't" /
    "doesn't"); anything else as it is."""
    low = verb.lower().replace("\u2019", "'")
    if low in ("don't", "dont"):
        return "doesn't"
    if low in ("haven't", "havent"):
        return "hasn't"
    if low in _IRREGULAR:
        return _IRREGULAR[low]
    if not verb.isalpha() or not verb.islower() or low in _SAME or low.endswith("ed") or "'" in low:
        return verb
    if re.search(r"(?:s|sh|ch|x|z|o)$", low):
        return verb + "es"
    if re.search(r"[^aeiou]y$", low):
        return verb[:-1] + "ies"
    return verb + "s"
