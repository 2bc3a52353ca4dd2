"""The offline reflector: what it keeps as items, how it types them, and what stays a turn."""

from __future__ import annotations

import pytest

from memworker import reflection


def _items(text: str, role: str = "user") -> list[reflection.Item]:
    return reflection.OfflineReflector().reflect(reflection.Episode(text, [{"role": role, "content": text}])).items


@pytest.mark.parametrize(
    "text",
    [
        "Sounds good, talk soon.",
        "No worries at all, have a nice weekend!",
        "Hey! Good to see you! How have you been?",
        "Thanks so much, that's really helpful!",
        "Bye! Take care and talk to you later.",
        "Thanks, Melanie! That's really sweet.",
        "That makes sense, thanks for explaining.",
        "Sorry for the late reply, it's been a busy day.",
    ],
)
def test_small_talk_is_never_an_item(text: str) -> None:
    assert _items(text) == []


@pytest.mark.parametrize(
    "text",
    ["It was an absolutely lovely evening.", "That felt really rewarding.", "I bet the concert was unforgettable!"],
)
def test_an_appraisal_of_what_a_pronoun_names_is_small_talk(text: str) -> None:
    assert _items(text) == []


@pytest.mark.parametrize(
    "text",
    ["It was my first marathon in ten years.", "That was the office in Lisbon we visited.", "It is 40 km from Porto."],
)
def test_a_pronoun_sentence_that_names_something_is_kept(text: str) -> None:
    assert [i.text for i in _items(text)] == [text]


def test_an_assistant_acknowledgement_is_small_talk_too() -> None:
    assert _items("Thanks Dana, noted. Let me know if there is anything else I can help with.", "assistant") == []


@pytest.mark.parametrize(
    "text",
    [
        "Please always contact me by email.",
        "Don't call me before 10 am.",
        "Could you always reply in German?",
        "Never send me marketing newsletters.",
        "I want the reports in PDF, not Excel.",
        "I'm not a fan of spicy food.",
        "I'd rather not get phone calls at work.",
        "Dumplings are one of my favourites.",
    ],
)
def test_wishes_standing_instructions_and_dislikes_are_preferences(text: str) -> None:
    (item,) = _items(text)
    assert (item.text, item.kind) == (text, "preference")


@pytest.mark.parametrize(
    "text",
    [
        "What is my favourite colour?",
        "Do you remember which editor I prefer?",
        "Which of these do I like best?",
        "Can you tell me what my budget was?",
    ],
)
def test_a_question_about_the_speaker_states_nothing(text: str) -> None:
    assert _items(text) == []


def test_a_question_after_a_statement_keeps_the_statement() -> None:
    text = "I'm 65 and retired, can you help me plan a trip?"
    assert [i.text for i in _items(text)] == [text]


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("We're going with Postgres for the analytics store.", "decision"),
        ("The board approved the move to the new office.", "decision"),
        ("The trick is to preheat the stone before the dough goes in.", "method"),
        ("We rotate the keys by running the vault script on Fridays.", "method"),
        ("Our daughter graduated from high school in June.", "event"),
        ("I just got back from a week of hiking in the Alps.", "event"),
    ],
)
def test_decisions_methods_and_events_in_everyday_words(text: str, kind: str) -> None:
    assert reflection._kind(text) == kind


def test_like_as_a_preposition_is_no_preference() -> None:
    assert reflection._kind("Moments like these remind us how important our friends are.") != "preference"
    assert reflection._kind("Caroline loves painting sunsets.") == "preference"


def test_a_sentence_with_content_among_the_small_talk_is_kept() -> None:
    texts = [i.text for i in _items("Thanks, Mel! I start my new job at Globex on Monday.")]
    assert texts == ["I start my new job at Globex on Monday."]


def test_in_a_conversation_the_assistant_messages_yield_no_item() -> None:
    episode = reflection.Episode(
        "",
        [
            {"role": "user", "content": "I moved the billing database to Postgres 16 last week."},
            {
                "role": "assistant",
                "content": "Great! You should run VACUUM ANALYZE after the upgrade to refresh the planner statistics.",
            },
        ],
    )
    items = reflection.OfflineReflector().reflect(episode).items
    assert [i.messages for i in items] == [(0,)]


def test_an_agent_log_of_assistant_messages_is_reflected() -> None:
    episode = reflection.Episode(
        "", [{"role": "assistant", "content": "Deployed the billing service v2.3 to production at 14:00."}]
    )
    assert [i.messages for i in reflection.OfflineReflector().reflect(episode).items] == [(0,)]


def test_code_and_markup_are_not_items() -> None:
    text = "username = db.Column(db.String(80), unique=True)\n## Setup\nI deploy the budget app on Render every Friday."
    assert [i.text for i in _items(text)] == ["I deploy the budget app on Render every Friday."]


def test_lines_of_data_comments_and_formulas_are_not_items() -> None:
    text = (
        '"retries": 3,\ntimeout: 30,\n// retry the upload when the network drops\n'
        "The odds are \\( 1/6 \\) for each face.\nOur uploads go to the Frankfurt bucket."
    )
    assert [i.text for i in _items(text)] == ["Our uploads go to the Frankfurt bucket."]


def test_a_lead_in_to_what_follows_is_no_item() -> None:
    text = (
        "Here's the cron entry I ended up with:\nThe backups run nightly at 02:00 from the replica.\n"
        "I moved the job to the replica last week, so this is the script now:"
    )
    assert [i.text for i in _items(text)] == [
        "The backups run nightly at 02:00 from the replica.",
        "I moved the job to the replica last week, so this is the script now:",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "[image: a photo of a turtle resting on a bed of smooth rocks]",
        "[laughs and waves goodbye]",
        "[image: a photo of a lake at dusk. Two kayaks are tied to the jetty]",
    ],
)
def test_a_note_about_the_message_in_brackets_is_no_item(text: str) -> None:
    assert _items(text) == []
    assert [i.text for i in _items(f"We finally adopted a tortoise from the shelter! {text}")] == [
        "We finally adopted a tortoise from the shelter!"
    ]
