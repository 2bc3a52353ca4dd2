"""/context packing: no sentence twice, nothing under the relevance floor, within the budget."""

from __future__ import annotations

from typing import Any

from memworker.sessions import context


def _hit(mid: str, text: str, score: float, kind: str = "fact") -> dict[str, Any]:
    return {"id": mid, "text": text, "kind": kind, "score": score, "created_at": "2026-05-01T10:00:00+00:00"}


def _count(text: str) -> int:
    return len(text.split())


def test_a_turn_and_the_item_reflected_from_it_are_packed_once() -> None:
    hits = [
        _hit("item", "Chen prefers email over phone calls.", 0.9),
        _hit("turn", "Chen (1 May 2026): Hi! Chen prefers email over phone calls. Thanks.", 0.7, "turn"),
        _hit("other", "The billing export runs nightly.", 0.8),
    ]
    kept = context.distinct(hits)
    assert [(h["id"], h["score"]) for h in kept] == [("turn", 0.9), ("other", 0.8)]


def test_a_memory_that_says_nothing_a_better_one_does_not_is_left_out() -> None:
    hits = [
        _hit("turn", "Dana (2 May 2026): We moved the standup to 10 am. It was too early.", 0.9, "turn"),
        _hit("item", "We moved the standup to 10 am.", 0.6),
        _hit("again", "we moved the standup to 10 AM!", 0.5),
    ]
    assert [h["id"] for h in context.distinct(hits)] == ["turn"]


def test_nothing_under_the_relevance_floor_is_packed_and_the_budget_holds() -> None:
    hits = [_hit(f"m{i}", f"Memory number {i} about topic {i}.", 1.0 - 0.1 * i) for i in range(10)]
    pieces = context.memory_pieces(hits, [], set())
    packed = context.pack(pieces, budget=400, count=_count, head=context.head("a", None))
    kept = set(packed.memory_ids)
    assert kept == {f"m{i}" for i in range(10) if 1.0 - 0.1 * i >= context.RELEVANCE_FLOOR * 1.0 - 1e-9}
    assert packed.tokens <= 400
    small = context.pack(pieces, budget=60, count=_count, head=context.head("a", None))
    assert small.tokens <= 60 and len(small.memory_ids) < len(kept)


def test_a_pinned_memory_under_the_floor_is_still_packed() -> None:
    hits = [_hit("best", "The deploy window is Friday.", 1.0), _hit("low", "Raj owns the SSO ticket.", 0.1)]
    pinned = [{**hits[1]}]
    assert {p.ref for p in context.memory_pieces(hits, pinned, set()) if p.score > 0} == {"best", "low"}


def test_a_turn_line_leaves_out_its_small_talk_and_greetings_repeat_nowhere() -> None:
    hits = [
        _hit(
            "a",
            "Gina (27 May 2023): Hey Jon! Long time no talk! I just got accepted for a fashion internship!",
            1.0,
            "turn",
        ),
        _hit(
            "b", "Gina (29 Jan 2023): Hey Jon! Long time no see! I launched an ad campaign for my store.", 0.9, "turn"
        ),
        _hit("c", "Jon (2 Feb 2023): Thanks, Gina!", 0.8, "turn"),
    ]
    lines = [p.text for p in context.memory_pieces(hits, [], set())]
    assert '"Gina (27 May 2023): I just got accepted for a fashion internship!"' in lines[0]
    assert '"Gina (29 Jan 2023): I launched an ad campaign for my store."' in lines[1]
    assert '"Jon (2 Feb 2023): Thanks, Gina!"' in lines[2]  # all small talk: shown as it was said
