"""PII redaction, applied (per policy) to episode content before the LLM sees it and
before anything is stored: emails, phone numbers, secrets and payment card numbers.

With the agent's redact_pii every text a tenant can store is redacted where it comes in:
episodes, memories, session goals, metadata and working memory, plan titles and step
outputs and notes, context-call queries, audit reasons. What is built from them (archives,
flushes, webhook payloads) then never holds the raw value."""

from __future__ import annotations

import re
from typing import Any

_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_SECRET = re.compile(
    r"\b(?:sk-[A-Za-z0-9_-]{16,}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{30,}|xox[abpr]-[A-Za-z0-9-]{10,}|"
    r"mwk_[0-9a-f]{12}_[A-Za-z0-9_-]{20,}|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})"
)
# "password: hunter2" keeps its label and loses its value.
_LABELLED = re.compile(r"(?i)\b(api[_-]?key|secret|token|password|passwd)(\s*[:=]\s*)\S{6,}")
_CARD = re.compile(r"\b(?:\d[ -]?){12,18}\d\b")
# A phone number is 8 to 15 digits in groups (each maybe in parentheses) joined by at most one
# space, dot or dash; a country code (+44) may open one. Numbers side by side are one run of
# such groups, which _phone cuts into numbers, so one number next to another never makes the
# two too long to be one and leaves both; a run is cut only into pieces that each look like a
# phone number on their own (_on_its_own), so a list of years or ids stays. Digits are matched
# possessively: linear on any text.
_COUNTRY = r"\+\d{1,4}(?:[ .-]?\(?\d++\)?)?"  # "+33 1": the group after a country code may be one digit
_PHONE = re.compile(rf"(?<![\w.])(?:{_COUNTRY}|\(?\d++\)?)(?:[ .-]?(?:{_COUNTRY}|\(?\d{{2,}}+\)?))*(?!\w|\.\d)")
_GROUP = re.compile(r"\+?\(?(\d+)\)?")
PHONE_DIGITS = (8, 15)  # fewer is a short number, more no phone number (E.164 ends at 15)
# A card's layout (four-digit groups, 16 to 19 digits) that is no card (Luhn) is one number too:
# not cut into phone numbers.
_CARD_LAYOUT = re.compile(r"\d{4}(?:[ -]\d{4}){3}(?:[ -]\d{1,3})?")
# The group sizes phone numbers are written in (415 555 0100, 1 415 555 0100, 20 7946 0958,
# 138 0013 8000, 0121 496 0000, 07700 900123): a piece in one of them is a phone number with no
# '+', '(' or trunk '0' to say so. Equal groups (years, ids, versions, accounts) are not among them.
_LAYOUTS = frozenset({(3, 3, 4), (1, 3, 3, 4), (2, 4, 4), (3, 4, 4), (4, 3, 4), (5, 6)})


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _card(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match.group(0))
    return "[CARD]" if 13 <= len(digits) <= 19 and _luhn(digits) else match.group(0)


_DATE = re.compile(r"^\d{4}[-/.]\d{1,2}[-/.]\d{1,2}$|^\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4}$")


def _is_phone(text: str) -> bool:
    """Dates, versions and short numbers are not phone numbers."""
    digits = sum(ch.isdigit() for ch in text)
    return PHONE_DIGITS[0] <= digits <= PHONE_DIGITS[1] and not _DATE.match(text.strip())


def _phone(match: re.Match[str]) -> str:
    found = match.group(0)
    if sum(ch.isdigit() for ch in found) <= PHONE_DIGITS[1]:
        return "[PHONE]" if _is_phone(found) else found
    return found if _CARD_LAYOUT.fullmatch(found) else _cut(found)


def _cut(run: str) -> str:
    """A run of digit groups longer than one phone number with each number in it redacted:
    the run is cut between groups into the numbers that redact the most digits, in as few
    numbers as can, preferring cuts before a '+' or '(' and at a space. Every number cut out
    looks like one on its own (_on_its_own); a group that belongs to no number stays."""
    groups = [(m.start(), m.end(), m.end(1) - m.start(1)) for m in _GROUP.finditer(run)]
    n = len(groups)
    opening = [_opening(run, groups, i) for i in range(n)]
    # best[i]: (digits redacted, -numbers, cut quality) over groups i.. and where the piece
    # that starts at i ends; phone[i]: whether that piece is one number
    best: list[tuple[tuple[int, int, int], int]] = [((0, 0, 0), n)] * (n + 1)
    phone = [False] * (n + 1)
    for i in range(n - 1, -1, -1):
        best[i], phone[i] = (best[i + 1][0], i + 1), False
        total = 0
        for j in range(i, min(n, i + PHONE_DIGITS[1])):
            total += groups[j][2]
            if total > PHONE_DIGITS[1]:
                break
            rest = best[j + 1][0]
            score = (rest[0] + total, rest[1] - 1, rest[2] + opening[i])
            if total < PHONE_DIGITS[0] or score <= best[i][0] or _DATE.match(run[groups[i][0] : groups[j][1]]):
                continue
            if _on_its_own(run, groups, i, j):
                best[i], phone[i] = (score, j + 1), True
    out, i, at = [], 0, 0
    while i < n:
        nxt = best[i][1]
        if phone[i]:
            out += [run[at : groups[i][0]], "[PHONE]"]
            at = groups[nxt - 1][1]
        i = nxt
    return "".join([*out, run[at:]])


def _on_its_own(run: str, groups: list[tuple[int, int, int]], i: int, j: int) -> bool:
    """Whether groups i..j of a run, cut out of it, look like a phone number by themselves:
    opened by '+' or '(' (a country or area code); opened by a trunk '0', unless they are
    equal groups of three or more digits (zero-padded ids: 0001 0002); or in a phone's
    layout (_LAYOUTS). Equal groups (years, ids, versions) and a long ungrouped number in a
    list are not, so cutting never takes a list of numbers for a list of phones."""
    start = groups[i][0]
    if run[start] in "+(":
        return True
    sizes = tuple(size for _, _, size in groups[i : j + 1])
    if run[start] == "0":
        return len(sizes) == 1 or len(set(sizes)) > 1 or sizes[0] < 3
    return sizes in _LAYOUTS


def _opening(run: str, groups: list[tuple[int, int, int]], i: int) -> int:
    """How well group i opens a number: after a '+' or '(' 2, after a space 1, else 0."""
    start = groups[i][0]
    if run[start] in "+(":
        return 2
    return 1 if i and run[groups[i - 1][1] : start] == " " else 0


def redact(text: str) -> str:
    """text with personal data and secrets replaced by [EMAIL], [SECRET], [CARD], [PHONE]."""
    text = _SECRET.sub("[SECRET]", text)
    text = _LABELLED.sub(r"\1\2[SECRET]", text)
    text = _EMAIL.sub("[EMAIL]", text)
    text = _CARD.sub(_card, text)
    return _PHONE.sub(_phone, text)


def redact_value(value: Any) -> Any:
    """A JSON value (metadata) with every string in it redacted, at any depth. Keys stay as
    they are: they name fields, and renaming them could make two keys collide."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redact_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_value(v) for v in value]
    return value


def redact_keys(value: Any, keys: frozenset[str]) -> Any:
    """A JSON value with the strings under the named keys redacted, at any depth; other
    strings (ids, statuses) stay as they are, so a redaction cannot break their format."""
    if isinstance(value, dict):
        return {k: redact(v) if k in keys and isinstance(v, str) else redact_keys(v, keys) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_keys(v, keys) for v in value]
    return value
