"""PII redaction (memworker/domain/redact.py) as a pure function: every phone number in a text is
replaced, however close it sits to the next one, and what is not a phone number stays."""

from __future__ import annotations

import re
import time

import pytest

from memworker.domain.redact import redact

# Adjacent numbers: each must go, whatever separates it from the next one.
ADJACENT = [
    ("Phones: 020 7946 0958 07700 900123", "Phones: [PHONE] [PHONE]"),
    ("(415) 555-0100 415-555-0199", "[PHONE] [PHONE]"),
    ("(415) 555-0100 (415) 555-0199", "[PHONE] [PHONE]"),
    ("415-555-0100 415-555-0199 415-555-0142", "[PHONE] [PHONE] [PHONE]"),
    ("415.555.0100 415.555.0199", "[PHONE] [PHONE]"),
    ("+44 20 7946 0958 +44 7700 900123", "[PHONE] [PHONE]"),
    ("+1 415 555 0100 +1 415 555 0199", "[PHONE] [PHONE]"),
    ("+44 (0)20 7946 0958 +33 1 23 45 67 89", "[PHONE] [PHONE]"),
    ("020 7946 0958, 07700 900123", "[PHONE], [PHONE]"),
    ("020 7946 0958/07700 900123", "[PHONE]/[PHONE]"),
    ("020 7946 0958 / 07700 900123", "[PHONE] / [PHONE]"),
    ("(415) 555-0100, 415-555-0199/+44 7700 900123", "[PHONE], [PHONE]/[PHONE]"),
    ("call 07700900123 07700900124 today", "call [PHONE] [PHONE] today"),
    ("+44 20 7946 0958, +44 7700 900123", "[PHONE], [PHONE]"),
    ("01 23 45 67 89 01 98 76 54 32", "[PHONE] [PHONE]"),  # a trunk 0 opens each
    ("415 555 0100 212 555 0143", "[PHONE] [PHONE]"),  # 3-3-4: a phone's layout
    ("138 0013 8000 139 0013 9000", "[PHONE] [PHONE]"),  # 3-4-4
]


@pytest.mark.parametrize(("text", "expected"), ADJACENT)
def test_each_of_several_adjacent_phone_numbers_is_redacted(text: str, expected: str) -> None:
    out = redact(text)
    assert out == expected
    assert not re.search(r"\d{3}", out), out  # no run of the numbers' digits is left


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("call +1 415 555 0199 now", "call [PHONE] now"),
        ("ring 020-7946-0958.", "ring [PHONE]."),
        ("(415)555-0100", "[PHONE]"),
        ("12345678", "[PHONE]"),
    ],
)
def test_a_single_phone_number_is_redacted(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "on 2024-06-01 at 10:30",
        "from 2024-06-01 to 2024-06-02",  # two dates side by side are not a phone number
        "version 1.2.3",
        "room 42, floor 7",
        "order 1234567",  # seven digits: too short
        "id 12345678901234567890",  # twenty digits in one run: not a phone number
        "scores 1 2 3 4 5 6 7 8 9",
        "not a card 1234 5678 9012 3456",  # a card's layout, no card (Luhn): one number, not two phones
        "not a card 1234-5678-9012-3456-789",
    ],
)
def test_what_is_not_a_phone_number_stays(text: str) -> None:
    assert redact(text) == text


# Runs of digit groups over 15 digits that are no phone numbers side by side: a piece cut out
# of them would not look like a phone number on its own (no '+', '(' or trunk '0', no phone's
# grouping), so the run stays.
NOT_PHONES = [
    "ids 1001 1002 1003 1004 1005",
    "2021 2022 2023 2024 2025 2026",
    "years 1999 2000 2001 2002 2003 2004 2005",
    "versions 10.12.14 10.12.15 10.13.01",
    "releases 3.11.20 3.12.10 3.13.00 3.14.10",
    "account 1234 5678 9012 3456 7890",  # five groups of four: no card's layout, no phone
    "accounts 12345678 87654321 11223344",
    "orders 1234567890 1234567891 1234567892",  # ungrouped ids
    "padded 001 002 003 004 005 006",  # zero-padded ids: a trunk 0 but equal groups
    "batch 100 200 300 400 500 600",
]


@pytest.mark.parametrize("text", NOT_PHONES)
def test_a_run_of_numbers_that_are_no_phone_numbers_stays(text: str) -> None:
    assert redact(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("years 2021 2022 415 555 0100", "years 2021 2022 [PHONE]"),
        ("ids 1001 1002 1003 1004 020 7946 0958", "ids 1001 1002 1003 1004 [PHONE]"),
        ("+44 20 7946 0958 2021 2022 2023", "[PHONE] 2021 2022 2023"),
    ],
)
def test_in_a_run_only_the_phone_numbers_go(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_a_long_run_of_numbers_is_redacted_in_linear_time() -> None:
    text = " ".join(["020 7946 0958"] * 20_000) + "x"
    started = time.perf_counter()
    out = redact(text)
    assert time.perf_counter() - started < 10  # loose: CI machines are busy; quadratic would take minutes
    assert out.count("7946") == 1 and out.endswith(" 7946 0958x")  # the last, glued to a word, is no number


def test_a_long_run_of_no_phone_numbers_is_read_in_linear_time() -> None:
    text = " ".join(["1001 1002 1003"] * 20_000) + "x"
    started = time.perf_counter()
    assert redact(text) == text
    assert time.perf_counter() - started < 10


def test_other_markers_still_apply() -> None:
    out = redact("mail dana@example.com, card 4111 1111 1111 1111, phone 020 7946 0958 07700 900123")
    assert out == "mail [EMAIL], card [CARD], phone [PHONE] [PHONE]"
