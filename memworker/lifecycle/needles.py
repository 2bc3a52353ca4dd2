"""What forget looks for when it erases copies of a text (memworker/erase/forget.py):
the needles of the memories and episodes a request erases, and the pure rewrite of a JSON
value without them. docs/lifecycle.md states the rule; in short, a text is a copy when it
contains, case-insensitively,
- the whole of an erased text (a forgotten memory's, an erased episode's content or one of
  its messages), whitespace collapsed, when that text is at least MIN_TEXT characters
  (shorter ones would match ordinary prose), or
- an identifier from one: a token of at least MIN_IDENT characters that is an email
  address or holds at least MIN_DIGITS digits (account, ticket, card, phone and national
  id numbers, keys), and is not a date, a time or a plain number (1,000,000 or 3.14159),
  which recur everywhere without identifying anything; or a number written in groups
  ('0151 496 0000', '4111 1111 1111 1111') of at least MIN_GROUPED_DIGITS digits."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

MIN_TEXT = 12
MIN_IDENT = 5
MIN_DIGITS = 5
MIN_GROUPED_DIGITS = 8  # '0151 496 0000': digits in groups, as phone and card numbers are written
PLACEHOLDER = "[forgotten]"

_TOKEN = re.compile(r"[\w@.+:/#-]+")
_SPACED = re.compile(r"\+?\(?\d[\d ().-]{6,}\d")  # a phone or card number written in groups
_EDGE = ".:/#-+"
_EMAIL = re.compile(r"^[\w.+-]+@[\w-]+(?:\.[\w-]+)+$")
_NOT_IDS = (
    re.compile(r"^\d{4}-\d{1,2}-\d{1,2}(?:t\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:z|[+-]\d{2}:?\d{2})?)?$"),
    re.compile(r"^\d{1,2}[/.-]\d{1,2}[/.-]\d{2,4}$"),  # 01/02/2025, 1.2.25
    re.compile(r"^\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?$"),  # 12:30, 12:30:45.5
    re.compile(r"^\d{1,3}(?:[,.]\d{3})+(?:\.\d+)?$"),  # 1,000,000 and 1.000.000,5
    re.compile(r"^\d+\.\d+$"),  # 3.14159
)


def identifiers(text: str) -> set[str]:
    """The identifiers in a text (lower-cased): see the module docstring."""
    out: set[str] = set()
    for raw in _SPACED.findall(text):
        spaced = " ".join(raw.split())
        if " " in spaced and sum(ch.isdigit() for ch in spaced) >= MIN_GROUPED_DIGITS:
            out.add(spaced)
    # lower(), not casefold(): Postgres's lower() and found_in() compare with it, and
    # casefold() rewrites some letters ('ß' -> 'ss') so its needle would never match
    for raw in _TOKEN.findall(text.lower()):
        token = raw.strip(_EDGE)
        if len(token) < MIN_IDENT or any(p.match(token) for p in _NOT_IDS):
            continue
        if _EMAIL.match(token) or sum(ch.isdigit() for ch in token) >= MIN_DIGITS:
            out.add(token)
    return out


def _collapsed(text: str) -> str:
    return " ".join(text.split()).lower()


@dataclass(frozen=True)
class Needles:
    """Lower-cased strings whose presence makes a text a copy of an erased one."""

    terms: tuple[str, ...] = ()

    @classmethod
    def of(cls, texts: Iterable[str]) -> Needles:
        found: set[str] = set()
        for text in texts:
            whole = _collapsed(text)
            if len(whole) >= MIN_TEXT:
                found.add(whole)
                if text.strip().lower() != whole:  # as stored, line breaks and all
                    found.add(text.strip().lower())
            found |= identifiers(text)
        # a needle inside another one adds nothing: keep the shortest that still matches
        kept = sorted(found, key=len)
        terms = [t for i, t in enumerate(kept) if not any(s in t for s in kept[:i])]
        return cls(tuple(sorted(terms)))

    def __bool__(self) -> bool:
        return bool(self.terms)

    def found_in(self, text: str | None) -> bool:
        if not text:
            return False
        low, whole = text.lower(), _collapsed(text)
        return any(n in low or n in whole for n in self.terms)

    def scrub(self, value: Any) -> tuple[Any, int]:
        """A JSON value with every string that holds a needle replaced by PLACEHOLDER, at any
        depth (keys stay: they name fields); and how many strings were replaced."""
        if isinstance(value, str):
            return (PLACEHOLDER, 1) if self.found_in(value) else (value, 0)
        if isinstance(value, dict):
            pairs = {k: self.scrub(v) for k, v in value.items()}
            return {k: v for k, (v, _) in pairs.items()}, sum(n for _, n in pairs.values())
        if isinstance(value, list):
            items = [self.scrub(v) for v in value]
            return [v for v, _ in items], sum(n for _, n in items)
        return value, 0
