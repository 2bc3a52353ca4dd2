"""The rule forget uses for copies of an erased text (memworker/lifecycle/needles.py) and the
pure rewrites of working memory, plans and archives without them."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from memworker.lifecycle import needles
from memworker.sessions import archive, plans, working
from memworker.storage import sessions_db

NOW = datetime(2026, 1, 2, tzinfo=UTC)


def test_identifiers_are_emails_and_long_digit_runs_not_dates_times_or_numbers() -> None:
    text = (
        "Alice (2 March 2025): my account ZK-7741-QX-3309, phone 0151 496 0000, mail a.b@example.org, "
        "ssn 078051120 on 2025-03-01 at 12:30:45 and 2025-03-01T12:30:00+01:00; total 1,000,000 or 3.14159, "
        "version 2.0.1, year 2024, room 12345."
    )
    assert needles.identifiers(text) == {"zk-7741-qx-3309", "0151 496 0000", "a.b@example.org", "078051120", "12345"}


def test_needles_keep_whole_texts_of_some_length_and_drop_ones_another_covers() -> None:
    found = needles.Needles.of(
        ["I prefer tea.", "The user prefers green tea in the morning.", "Ticket  INC-0042311 open"]
    )
    # 'I prefer tea.' is 13 characters: a needle; the ticket's whole text holds its identifier
    assert found.terms == ("i prefer tea.", "inc-0042311", "the user prefers green tea in the morning.")
    assert found.found_in("Note: THE USER PREFERS GREEN TEA IN THE   MORNING.")
    assert found.found_in("see inc-0042311") and not found.found_in("tea") and not found.found_in(None)
    assert not needles.Needles.of(["short", "tea"])  # nothing long or identifying enough


def test_scrub_replaces_strings_at_any_depth_and_counts_them() -> None:
    found = needles.Needles.of(["ZK-7741-QX-3309"])
    value = {"a": "holds ZK-7741-QX-3309", "b": ["ok", {"c": "zk-7741-qx-3309!"}], "d": 3, "e": None}
    clean, n = found.scrub(value)
    assert n == 2 and clean == {"a": "[forgotten]", "b": ["ok", {"c": "[forgotten]"}], "d": 3, "e": None}


def test_working_memory_and_plan_lose_the_texts_that_hold_a_needle() -> None:
    found = needles.Needles.of(["ZK-7741-QX-3309"])
    doc, _ = working.apply(
        working.empty(),
        working.Patch(
            goal="Close ZK-7741-QX-3309",
            intent="reply politely",
            add=(
                working.NewItem("constraint", "Never read ZK-7741-QX-3309 aloud"),
                working.NewItem("decision", "Use email"),
            ),
        ),
        revision=1,
        now=NOW,
        max_items=50,
        prune_to=30,
    )
    clean, n = working.scrub(doc, found.found_in)
    assert n == 2 and clean["goal"] is None and clean["intent"] == "reply politely"
    assert [i["text"] for i in clean["items"]] == ["Use email"]
    plan = plans.build(
        {
            "title": "Closing ZK-7741-QX-3309",
            "milestones": [
                {"title": "Verify", "steps": [{"title": "Look up ZK-7741-QX-3309", "output": "ZK-7741-QX-3309 found"}]}
            ],
        },
        old=None,
        now=NOW,
    )
    scrubbed, m = plans.scrub(plan, found.found_in)
    step = scrubbed["milestones"][0]["steps"][0]
    assert m == 3 and scrubbed["title"] is None and step["title"] == plans.FORGOTTEN and step["output"] is None
    assert scrubbed["milestones"][0]["title"] == "Verify" and plans.resume(scrubbed)["steps_total"] == 1
    assert plans.scrub(None, found.found_in) == (None, 0)


def test_an_archive_loses_erased_episodes_matching_calls_and_texts_and_says_so() -> None:
    found = needles.Needles.of(["ZK-7741-QX-3309"])
    blank = {f.name: None for f in dataclasses.fields(sessions_db.Session)}
    mine = {"agent_id": "a", "id": "s", "working": {"goal": "Close ZK-7741-QX-3309"}}
    session = sessions_db.Session(**blank | mine | {"metadata": {"account": "ZK-7741-QX-3309"}})
    lines = archive.snapshot(session, [], [], version=1, archived_at=NOW)
    lines[-1:-1] = [
        {"type": "episode", "id": "e1", "content": "unrelated"},
        {"type": "episode", "id": "e2", "content": "my account is ZK-7741-QX-3309"},
        {"type": "episode", "id": "e3", "content": "kept"},
        {"type": "context_call", "id": "c1", "query": "about zk-7741-qx-3309"},
        {"type": "context_call", "id": "c2", "query": "weather"},
        {"type": "item", "position": 0, "item": {"role": "user", "content": [{"text": "ZK-7741-QX-3309 please"}]}},
        {"type": "item", "position": 1, "item": {"role": "assistant", "content": "on it"}},
    ]
    kept, gone = archive.scrub_lines(lines, {"e1"}, found)
    assert gone == {"episodes": 2, "context_calls": 1, "items": 1, "texts": 2}
    assert [x["position"] for x in kept if x["type"] == "item"] == [1] and kept[-1]["counts"]["items"] == 1
    assert [x["id"] for x in kept if x["type"] in ("episode", "context_call")] == ["e3", "c2"]
    assert kept[-1]["scrubbed"] and kept[-1]["counts"]["episodes"] == 1
    assert "zk-7741" not in str(kept).lower()
    same, nothing = archive.scrub_lines(kept, set(), found)
    assert same == kept and not any(nothing.values())


def test_identifiers_keep_letters_that_casefold_would_rewrite() -> None:
    # the copy search compares with lower() (found_in here, lower() in Postgres): a needle
    # made with casefold() ('ß' -> 'ss') would never match the text it came from
    assert needles.identifiers("Kunde Straße-40771 zahlt") == {"straße-40771"}
    found = needles.Needles.of(["Kunde Straße-40771 zahlt"])
    assert found.found_in("die Nummer STRASSE-40771 ist anders") is False
    assert found.found_in("siehe Straße-40771 im Vertrag")
