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
_PHONE = re.compile(r"(?<![\w.])\+?\(?\d{1,4}\)?(?:[ .-]?\(?\d{2,4}\)?){2,4}(?!\w|\.\d)")


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


def _phone(match: re.Match[str]) -> str:
    found = match.group(0)
    digits = re.sub(r"\D", "", found)
    # Dates, versions and short numbers are not phone numbers.
    return "[PHONE]" if 8 <= len(digits) <= 15 and not _DATE.match(found.strip()) else found


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
