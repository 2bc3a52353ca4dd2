"""A short reply is read with the question it answers (memworker.domain.episodic.turns): its
text stays its own, but BM25 indexes and the embedding sees the other speaker's question."""

from __future__ import annotations

import pytest

from memworker.domain import episodic

ASKED = {"role": "user", "name": "Kofi", "content": "Nice shot! Which lake is that? Did you swim?"}


def test_a_short_reply_is_indexed_and_embedded_with_the_question() -> None:
    reply = {"role": "user", "name": "Ines", "content": "Lake Bled, and yes, it was freezing."}
    _, turn = episodic.turns([ASKED, reply], "", None)
    assert turn.text == "Ines: Lake Bled, and yes, it was freezing."
    assert turn.asked == "Which lake is that? Did you swim?"
    assert turn.message_text == f"{turn.text} {turn.asked}"
    assert turn.embedded == turn.message_text


def test_a_reply_of_the_same_speaker_or_to_no_question_carries_nothing() -> None:
    same = {"role": "user", "name": "Kofi", "content": "Sorry, I meant the one in the second photo."}
    told = {"role": "user", "name": "Kofi", "content": "We hiked around Lake Bled last week."}
    reply = {"role": "user", "name": "Ines", "content": "Looks lovely."}
    for messages in ([ASKED, same], [told, reply]):
        turn = episodic.turns(messages, "", None)[-1]
        assert turn.asked == "" and turn.message_text is None and turn.embedded == turn.text


@pytest.mark.parametrize("role", ["assistant", "user"])
def test_unnamed_messages_count_as_two_speakers(role: str) -> None:
    user = {"role": "user", "content": "What port does the staging database listen on?"}
    answer = {"role": role, "content": "Port 6432, behind PgBouncer."}
    _, turn = episodic.turns([user, answer], "", None)
    assert turn.asked == "What port does the staging database listen on?"


def test_a_long_reply_is_indexed_as_itself() -> None:
    long = {
        "role": "assistant",
        "content": " ".join(f"Step {i} restarts replica {i} and checks it." for i in range(40)),
    }
    turns = episodic.turns([{"role": "user", "content": "How do I restart the replicas?"}, long], "", None)[1:]
    assert len(turns) > 1 and all(t.asked == "" for t in turns)
    assert "How do I" not in (turns[0].message_text or "")


def test_a_reply_of_another_subject_carries_nothing() -> None:
    asked = {"role": "user", "content": "What is your date of birth?", "subject": "ana"}
    reply = {"role": "user", "content": "The 4th of May.", "subject": "ben"}
    _, turn = episodic.turns([asked, reply], "", None)
    assert turn.asked == "" and turn.message_text is None
