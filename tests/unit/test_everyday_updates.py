"""Knowledge updates said as people say them (memworker.domain.updates.revision through
rules.changed): a changed value, a replacement, a retraction, in other words than the old
statement; and statements that look alike but are both true (another subject, an addition,
history, a plan, a question) left alone."""

from __future__ import annotations

from datetime import datetime

import pytest

from memworker.domain import rules, statements, updates
from memworker.domain.policy import Policy

UPDATES = [
    ("Our on-call number is 555-0134.", "New on-call number: 555-0188."),
    ("We use Datadog for monitoring.", "Monitoring moved over to Grafana last sprint."),
    (
        "The customer prefers to be contacted by email, never by phone.",
        "Update: the customer now prefers to be contacted by phone, never by email.",
    ),
    ("Dana handles billing questions.", "Billing questions now go to Marcus."),
    ("The team has 8 engineers.", "We're down to 6 engineers after the reorg."),
    ("Our CI runs on Jenkins.", "We switched CI from Jenkins to GitHub Actions."),
    ("The standup is at 9:30 every morning.", "Standup got moved to 10:15."),
    ("Priya is the account manager for Globex.", "Globex's account manager is Tom now."),
    ("Sam lives in Lisbon.", "Sam moved to Porto in the spring."),
    ("The launch date is March 3.", "Launch slipped to March 17."),
    ("Project Atlas is on track.", "Atlas is blocked on the security review."),
    ("The API is at version 2.3.", "We shipped v2.4 of the API yesterday."),
    ("The marketing budget is $40k per quarter.", "Marketing budget was raised to $55k a quarter."),
    ("I'm vegetarian.", "I eat fish again these days, so I'm not vegetarian anymore."),
    ("We're on the Starter plan.", "We upgraded to the Business plan."),
    ("Maria works at Acme Corp.", "Maria left Acme and joined Initech."),
    ("The office is on the 3rd floor.", "Heads up, we're on the 5th floor now."),
    ("The repo is hosted on GitLab.", "The repo lives on GitHub now."),
    ("Rent is 1200 a month.", "The landlord bumped the rent to 1350."),
    ("Jonas reports to Elena.", "Jonas now reports to Farid."),
    ("The password rotation policy is every 90 days.", "Passwords now have to be rotated every 60 days."),
    ("We deploy on Tuesdays.", "Deploys happen on Thursdays from now on."),
    ("My phone number is 415-555-0101.", "Please use my new number, 415-555-0199."),
    ("Our main vendor for laptops is Dell.", "We replaced Dell with Lenovo for laptops."),
    ("The kids' school starts at 8.", "School starts at 8:30 this year."),
    ("Ticket 4411 is open.", "Ticket 4411 was closed this morning."),
    ("The primary database is Postgres 14.", "We upgraded the primary database to Postgres 16."),
    ("The meeting room is Orion.", "The meeting is in Vega instead of Orion."),
]

BOTH_TRUE = [
    ("Alice's office is in room 4.", "Bob's office is in room 7."),
    ("The frontend team has 5 engineers.", "The backend team has 9 engineers."),
    ("We use Postgres for the main database.", "We also use Redis for caching."),
    ("In 2023 we used Jenkins for CI.", "We use GitHub Actions for CI."),
    ("We're on AWS.", "We're thinking about moving to GCP next year."),
    ("Our main customer in Europe is Acme.", "Our main customer in Asia is Globex."),
    ("The standup is at 9:30.", "Is the standup still at 9:30?"),
    ("Sam lives in Lisbon.", "Sam's sister lives in Porto."),
    ("The API is at version 2.3.", "The SDK is at version 1.8."),
    ("Priya is the account manager for Globex.", "Tom is the account manager for Initech."),
    ("We have an office in Berlin.", "We have another office in London."),
    ("The launch date is March 3.", "The beta date is February 10."),
    ("I like hiking.", "I also love swimming."),
    ("Ticket 4411 is about SSO.", "Ticket 4412 is about SSO."),
    ("The marketing budget is $40k per quarter.", "The sales budget is $60k per quarter."),
    ("Maria works at Acme Corp.", "Maria's husband works at Initech."),
    ("Our CI runs on Jenkins.", "Our CD pipeline runs on Argo."),
    ("Jonas reports to Elena.", "Elena reports to the CTO."),
    ("I used to live in Paris.", "I live in Berlin."),
    ("We might switch to Slack.", "We use Teams for chat."),
    ("The office is on the 3rd floor.", "The kitchen is on the 2nd floor."),
    ("My phone number is 415-555-0101.", "My work number is 415-555-0777."),
    ("We deploy on Tuesdays.", "We release the mobile app on Fridays."),
    ("Rent is 1200 a month.", "Parking is 150 a month."),
    ("The repo is hosted on GitLab.", "The docs are hosted on Netlify."),
    ("Bob lives in Paris.", "Alice now lives in Berlin."),
    ("Our CTO is Maria.", "Our CFO is now James."),
    ("I work at Google.", "My husband now works at Meta."),
    ("Raj sits with the SRE team.", "Raj moved the retro to Thursday."),
    ("The office is in Berlin.", "We now have 40 people."),
    ("Tom joined the design team in March.", "Ana joined the data team."),
    ("We use Slack for chat.", "These days we use Notion for docs."),
    ("I run 5k on Mondays.", "I now swim on Wednesdays."),
    ("The frontend runs on React.", "The backend now runs on Go."),
    ("The London office has 30 desks.", "The Paris office now has 25 desks."),
    ("Maria is our designer.", "Maria moved to the design system team for a month, on loan."),
    ("I'm learning Spanish.", "I'm now learning Italian too."),
    ("Sara manages the Berlin team.", "Sara now also manages the Lisbon team."),
    ("Ken lives in Brooklyn.", "Ken's brother moved to Queens."),
    ("Our budget for Q1 is 20k.", "Our budget for Q2 is now 25k."),
    ("The API rate limit is 100 per minute.", "The webhook timeout is now 30 seconds."),
    ("My manager is Priya.", "I now mentor two juniors, Ana and Bo."),
    ("We host on AWS.", "We moved the marketing site to Netlify."),
    ("The user has a cat named Tom.", "The user adopted a dog named Rex."),
    ("Rent is 1,350 a month.", "When we moved in five years ago, rent was 950."),
    ("Runbook step number 1 for the pager.", "Runbook step number 2 for the pager."),
    (
        "Orion's migration locked the accounts table for nine minutes.",
        "A dry run of the Orion migration on a staging copy took forty minutes.",
    ),
]


@pytest.mark.parametrize(("older", "newer"), UPDATES)
def test_an_everyday_update_is_a_change(older: str, newer: str) -> None:
    assert rules.changed(older, newer) is not None


@pytest.mark.parametrize(("older", "newer"), BOTH_TRUE)
def test_look_alikes_that_are_both_true_are_no_change(older: str, newer: str) -> None:
    assert rules.changed(older, newer) is None


def test_a_change_told_as_an_event_supersedes_a_fact() -> None:
    old = rules.Fact("a", "Sam lives in Lisbon.", "fact", "L1", 0.7, datetime(2026, 1, 1))
    new = rules.Fact("b", "Sam moved to Porto in the spring.", "event", "L1", 0.7, datetime(2026, 2, 1))
    verdict = rules.judge(old, new, Policy())
    assert verdict is not None and verdict.action == "supersede"


def test_a_state_changed_by_what_happened_is_judged_like_a_fact() -> None:
    # the newer is an event with no word of change: the rule for two statements decides
    old = rules.Fact("a", "The lease renewal is still under review.", "fact", "L1", 0.7, datetime(2026, 1, 1))
    new = rules.Fact("b", "We signed the lease renewal this morning.", "event", "L1", 0.7, datetime(2026, 2, 1))
    verdict = rules.judge(old, new, Policy())
    assert verdict is not None and verdict.action == "supersede"
    assert rules.judge(new, old, Policy()) is None  # an event is changed only by the everyday rule


def test_an_event_without_a_word_of_change_revises_nothing() -> None:
    old = rules.Fact("a", "Met Anna on Monday.", "event", "L1", 0.7, datetime(2026, 1, 1))
    new = rules.Fact("b", "Met Anna on Tuesday.", "event", "L1", 0.7, datetime(2026, 2, 1))
    assert rules.judge(old, new, Policy()) is None


def test_a_clause_of_a_longer_sentence_can_carry_the_update() -> None:
    assert updates.clauses("Priya started at Adyen, she left Stripe in January.")[1:] == [
        "Priya started at Adyen",
        "she left Stripe in January.",
    ]
    assert rules.changed("Priya works at Stripe.", "Priya started at Adyen, she left Stripe in January.")


# Long sentences of one speaker on one topic: each states several things, and two of them
# sharing a topic and differing in a number (a result and a goal) are not one fact changed.
LONG_ON_ONE_TOPIC = [
    (
        "I ran 5 km in 31 minutes on Saturday, which felt slow, and my coach wants me to do intervals "
        "twice a week before the race in May.",
        "I did the intervals on Tuesday, 6 rounds of 400 m, and my coach now says I could aim for 28 "
        "minutes at the race in May.",
    ),
]


@pytest.mark.parametrize(("older", "newer"), LONG_ON_ONE_TOPIC)
def test_long_sentences_on_one_topic_are_no_change(older: str, newer: str) -> None:
    assert rules.changed(older, newer) is None


def test_a_doubt_retracts_nothing() -> None:
    older = "I want to make sure I'm rotating the keys correctly and that the alerts fire on time."
    assert rules.changed(older, "But I'm not sure if this is the correct approach.") is None
    assert rules.changed("I set up the staging database.", "I didn't set up the staging database.") is not None


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("Our stack is Django 4.2 and Redis 7.", "Our stack is Postgres 16 and Django 4.2."),
        ("The image bundles Node 20 and npm 10.", "The image bundles Node 20 and pnpm 9."),
    ],
)
def test_another_list_that_keeps_a_value_is_no_change(older: str, newer: str) -> None:
    assert rules.changed(older, newer) is None


def test_a_list_said_to_have_changed_is_a_change() -> None:
    assert rules.changed("Our stack is Django 4.2 and Redis 7.", "Our stack is now Postgres 16 and Django 4.2.")


def test_a_count_changes_no_date() -> None:
    assert rules.changed("I joined the climbing gym on March 2.", "I've been to the climbing gym 12 times.") is None
    assert rules.changed("The retro is on March 2.", "The retro is on March 9.") is not None
    assert rules.changed("Yusuf is single.", "Yusuf got engaged to Hana last weekend!") is not None


@pytest.mark.parametrize(
    "newer", ["That didn't fix the timeout either.", "It is 40 minutes now.", "This is the wrong port."]
)
def test_a_statement_about_what_was_just_said_revises_nothing(newer: str) -> None:
    assert rules.changed("The nightly import times out after 30 minutes on port 5432.", newer) is None


def test_an_acronym_subject_is_no_pointer() -> None:
    assert rules.changed("The printer on floor 2 is broken.", "IT fixed the floor 2 printer.") is not None


def test_a_statement_reads_its_subject_values_and_cues() -> None:
    s = statements.parse("Heads up: the standup moved to 10:15 on Mondays.")
    assert [w.raw for w in s.subject()] == ["the", "standup"]
    assert {"10:15", "monday"} <= s.values
    assert s.change and not s.question and not s.plan
    assert statements.parse("Is the standup still at 9:30?").question
    assert statements.parse("We might move the standup to 10.").plan
    assert statements.parse("In 2023 we used Jenkins.").history
    assert statements.parse("We also use Redis.").addition
    assert statements.parse("We switched from Jenkins to Buildkite.").olds >= {"jenkin"}


def test_a_speaker_label_names_who_said_it_not_what_it_is_about() -> None:
    assert statements.quoted("Caroline: I moved to Lyon.") == ("Caroline", "I moved to Lyon.")
    assert statements.quoted("Mary Ann: my number is 555-0101") == ("Mary Ann", "my number is 555-0101")
    for heading in (
        "Update: I moved to Lyon.",
        "Onboarding PO: Aisha (Sven moved to growth)",
        "Correction: all-hands is remote",
    ):
        assert statements.quoted(heading) == (None, heading)


def test_turns_of_two_speakers_written_as_memories_do_not_supersede_each_other() -> None:
    old = rules.Fact("a", "Melanie: I live in Denver with my kids.", "fact", "L1", 0.9, datetime(2026, 1, 1))
    new = rules.Fact("b", "Caroline: I live in Boston now.", "fact", "L1", 0.9, datetime(2026, 2, 1))
    assert rules.judge(old, new, Policy()) is None
    small_talk = rules.Fact("c", "Caroline: No worries, Mel! Enjoy your day!", "fact", "L1", 0.9, datetime(2026, 3, 1))
    hello = rules.Fact(
        "d", "Caroline: Hey Mel! Good to see you! How have you been?", "fact", "L1", 0.9, datetime(2026, 1, 1)
    )
    assert rules.judge(hello, small_talk, Policy()) is None


def test_the_same_speaker_updating_a_labelled_turn_still_supersedes() -> None:
    old = rules.Fact("a", "Caroline: I live in Denver.", "fact", "L1", 0.9, datetime(2026, 1, 1))
    new = rules.Fact("b", "Caroline: I moved to Boston last month.", "fact", "L1", 0.9, datetime(2026, 2, 1))
    verdict = rules.judge(old, new, Policy())
    assert verdict is not None and verdict.action == "supersede"
    assert (verdict.older, verdict.newer) == (old, new)  # the memories as stored, label and all


@pytest.mark.parametrize(
    ("older", "newer", "denied"),
    [
        ("I met Bryan at the film festival last spring.", "I've never met Bryan at any film festival.", True),
        ("We migrated the billing database to Postgres in May.", "We have never migrated the billing database.", True),
        ("We had an outage in the US region last week.", "We've never had an outage in the EU region.", False),
        ("My sister tried the vegan place on Elm Street.", "I've never tried the vegan place on Elm Street.", False),
        ("I want to attend the Rust workshop in June.", "I've never attended a Rust workshop.", False),
    ],
)
def test_a_denial_of_what_happened_goes_to_review(older: str, newer: str, denied: bool) -> None:
    old = rules.Fact("a", older, "event", "L1", 0.7, datetime(2026, 1, 1))
    new = rules.Fact("b", newer, "fact", "L1", 0.7, datetime(2026, 2, 1))
    verdict = rules.judge(old, new, Policy())
    assert (verdict is not None and verdict.action == "review") is denied


@pytest.mark.parametrize(
    "newer",
    [
        "As of Monday the support inbox is help@northwind.io.",
        "Heads up everyone: starting next week, the support inbox is help@northwind.io.",
        "From 1 June, the support inbox is help@northwind.io.",
    ],
)
def test_when_an_update_takes_effect_is_no_part_of_its_subject(newer: str) -> None:
    assert rules.changed("The support inbox is support@northwind.io.", newer) is not None


def test_a_day_that_names_another_thing_keeps_it_apart() -> None:
    assert rules.changed("Monday's standup is at 9:30.", "Tuesday's standup is at 10:00.") is None
