"""Export and import on the real stack (docs/export.md): a round trip into another tenant
recalls alike and exports alike, a second import adds nothing, a bad line changes nothing,
another model's vectors are computed again, scopes and tenants hold, a subject's export
spans agents; plain JSONL and LangGraph items go through the ordinary write."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memworker import keys
from memworker.sdk import ApiError, Client
from memworker.storage import db

FACTS = [
    "The deploy target is Postgres 16 on Hetzner.",
    "Maria prefers tea over coffee in the morning.",
    "The quarterly review happens on the first Monday of April.",
    "Our staging cluster runs in eu-central-1.",
    "The API rate limit is 100 requests per second per key.",
    "Tom is allergic to peanuts.",
    "The release train leaves every second Thursday.",
    "Backups are kept for 35 days in cold storage.",
    "The design system uses an 8 pixel grid.",
    "Invoices are due 30 days after issue.",
    "The on-call rotation changes every Monday at 9am.",
    "Grafana dashboards live in the observability folder.",
]
QUESTIONS = ["where do we deploy", "what does Maria drink", "when are invoices due", "how long are backups kept"]

# What an import changes by rule: every id is derived anew for the target tenant and agent
# (memory ids and what names them: superseded_by, carried_by, related ids; episode ids and
# their memory ids; a session's last flush episode), the source key (import:<agent>/<old id>),
# and the header's agent and time.
CHANGED = ("id", "superseded_by", "carried_by", "source_key", "memory_ids", "last_flush_episode_id", "agent")


@pytest.fixture(scope="module")
def clients(api: str, tenants: dict[str, Any]) -> dict[str, Client]:
    return {name: Client(api, t["key"], timeout=120) for name, t in tenants.items()}


@pytest.fixture(scope="module")
def source(clients: dict[str, Client], worker: Any) -> str:
    """alice's agent 'src': direct writes (general and a subject's), an episode the worker
    stored, a session with working memory and a plan, a policy override."""
    c = clients["alice"]
    c.add_memories("src", [{"text": t, "metadata": {"i": i}} for i, t in enumerate(FACTS)])
    c.add_memory("src", "Carol's order ships to Lisbon.", subject="carol", kind="event")
    ep = c.add_episode("src", "I just moved my weekly sync with Priya to Wednesdays at 3pm.")
    c.wait_for_episode("src", ep["episode_id"])
    c.create_session("src", "s1", goal="ship the export")
    c.update_working("src", "s1", add=[{"kind": "decision", "text": "the export streams NDJSON"}])
    c.add_session_items("src", "s1", [{"role": "user", "content": "export it"}, {"type": "function_call", "n": 1}])
    c.set_policy({"recall_vector_weight": 0.6}, agent_id="src")
    return "src"


def _lines(data: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in data.decode().splitlines() if line.strip()]


def _comparable(lines: list[dict[str, Any]]) -> list[str]:
    """The records without what must change, as sorted canonical JSON (one batch shares a
    created_at, and new ids order those rows differently)."""
    out = []
    for obj in lines[1:]:
        obj = {k: v for k, v in obj.items() if k not in CHANGED}
        if "events" in obj:
            obj["events"] = [{k: v for k, v in e.items() if k != "related_ids"} for e in obj["events"]]
        out.append(json.dumps(obj, sort_keys=True))
    return sorted(out)


def _top5(c: Client, agent: str) -> list[set[str]]:
    return [{m["text"] for m in c.recall(agent, q, k=5)["memories"]} for q in QUESTIONS]


def test_round_trip_into_another_tenant(clients: dict[str, Client], source: str) -> None:
    alice, bob = clients["alice"], clients["bob"]
    original = alice.download_export(source, embeddings=True)
    lines = _lines(original)
    header = lines[0]
    assert (header["format"], header["version"], header["agent"], header["embeddings"]) == (
        "memworker-export",
        1,
        "src",
        True,
    )
    assert header["model"] and header["exported_at"]
    types = {line["type"] for line in lines[1:]}
    assert {"memory", "episode", "session", "session_item", "policy", "end"} <= types
    kinds = {line["kind"] for line in lines if line.get("type") == "memory"}
    assert "turn" in kinds and "fact" in kinds or "event" in kinds

    report = bob.import_file("copy", original)
    n = sum(1 for line in lines if line.get("type") == "memory")
    assert (report["format"], report["memories_written"], report["memories_existing"]) == ("memworker", n, 0)
    assert report["reembedded"] == 0 and report["episodes_written"] == 1 and report["sessions_written"] == 1
    assert report["session_items_written"] == 2
    assert bob.session_items("copy", "s1") == alice.session_items(source, "s1")  # positions, items, dates

    again = bob.download_export("copy", embeddings=True)
    assert _comparable(_lines(again)) == _comparable(lines)
    assert _top5(bob, "copy") == _top5(alice, source)
    assert bob.policy("copy")["overrides"]["recall_vector_weight"] == 0.6

    # the same file again adds nothing
    second = bob.import_file("copy", original)
    assert (second["memories_written"], second["memories_existing"]) == (0, n)
    assert (second["session_items_written"], second["session_items_existing"]) == (0, 2)
    assert _comparable(_lines(bob.download_export("copy", embeddings=True))) == _comparable(lines)

    # tenants apart: alice cannot see bob's copy, bob cannot export alice's agent
    for c, agent in ((alice, "copy"), (bob, source)):
        with pytest.raises(ApiError) as err:
            c.download_export(agent)
        assert err.value.status == 404


def test_a_session_item_needs_its_session_line_before_it(clients: dict[str, Client], source: str) -> None:
    alice, bob = clients["alice"], clients["bob"]
    lines = alice.download_export(source).decode().splitlines()
    sessions = [i for i, line in enumerate(lines) if json.loads(line).get("type") == "session"]
    orphan = [line for line in lines if json.loads(line).get("type") == "session_item"]
    assert sessions and orphan
    kept = [line for i, line in enumerate(lines) if i not in sessions]
    end = json.loads(kept[-1])
    end["counts"].pop("session")
    kept[-1] = json.dumps(end)
    with pytest.raises(ApiError) as err:
        bob.import_file("orphans", "\n".join(kept).encode())
    assert err.value.status == 422 and "session 's1' has no session line before it" in str(err.value)
    with pytest.raises(ApiError) as err:
        bob.session_items("orphans", "s1")
    assert err.value.status == 404  # nothing was written


def test_a_bad_line_names_its_number_and_writes_nothing(clients: dict[str, Client], source: str) -> None:
    alice, bob = clients["alice"], clients["bob"]
    good = alice.download_export(source).decode().splitlines()
    lines = list(good)
    broken = json.loads(lines[4])
    assert broken["type"] == "memory"
    broken["salience"] = 2
    lines[4] = json.dumps(broken)
    with pytest.raises(ApiError) as err:
        bob.import_file("broken", "\n".join(lines).encode())
    assert err.value.status == 422 and "line 5" in str(err.value) and "salience" in str(err.value)
    with pytest.raises(ApiError) as err:  # nothing written: not even the agent
        bob.list_memories("broken")
    assert err.value.status == 404
    cut = "\n".join(good[:-1]).encode()  # no end line: a file cut short
    with pytest.raises(ApiError) as err:
        bob.import_file("broken", cut)
    assert err.value.status == 422 and "end line" in str(err.value)


def test_another_model_is_embedded_again(clients: dict[str, Client], source: str) -> None:
    alice, charlie = clients["alice"], clients["charlie"]
    lines = _lines(alice.download_export(source, embeddings=True))
    lines[0]["model"] = "some-other-model"
    data = "\n".join(json.dumps(x) for x in lines).encode()
    report = charlie.import_file("other", data)
    n = sum(1 for line in lines if line.get("type") == "memory")
    assert report["reembedded"] == n == report["memories_written"]
    assert _top5(charlie, "other") == _top5(alice, source)
    # without vectors in the file, likewise
    plain = alice.download_export(source)
    assert charlie.import_file("novec", plain)["reembedded"] == n


def test_scopes(
    clients: dict[str, Client], source: str, stack: dict[str, Any], tenants: dict[str, Any], api: str
) -> None:
    with db.connect(stack["owner_url"]) as conn:
        db.bind_tenant(conn, tenants["alice"]["id"])
        writer, _ = keys.create(conn, tenant_id=tenants["alice"]["id"], name="w", scopes=("memories:write",))
        reader, _ = keys.create(conn, tenant_id=tenants["alice"]["id"], name="r", scopes=("memories:read",))
        conn.commit()
    data = clients["alice"].download_export(source)
    for call in (
        lambda: Client(api, writer).download_export(source),
        lambda: Client(api, writer).download_subject_export("carol"),
        lambda: Client(api, reader).import_file("scoped", data),
    ):
        with pytest.raises(ApiError) as err:
            call()
        assert err.value.status == 403


def test_subject_export_spans_agents(clients: dict[str, Client], source: str) -> None:
    alice, bob = clients["alice"], clients["bob"]
    alice.add_memory("helpdesk", "Carol asked for a refund on order 77.", subject="carol")
    alice.add_memory("helpdesk", "Dan asked about shipping times.", subject="dan")
    for who in ("carol", "dan"):
        alice.create_session("helpdesk", f"chat-{who}", subject=who)
        alice.add_session_items("helpdesk", f"chat-{who}", [{"role": "user", "content": f"{who} here"}])
    lines = _lines(alice.download_subject_export("carol"))
    assert lines[0]["subject"] == "carol" and lines[0]["agent"] is None
    memories = [x for x in lines if x.get("type") == "memory"]
    assert {(m["agent"], m["text"]) for m in memories} == {
        ("src", "Carol's order ships to Lisbon."),
        ("helpdesk", "Carol asked for a refund on order 77."),
    }
    items = [(x["session_id"], x["item"]["content"]) for x in lines if x.get("type") == "session_item"]
    assert items == [("chat-carol", "carol here")]  # the subject's sessions' items only
    assert lines[-1] == {"type": "end", "counts": {"memory": 2, "session": 1, "session_item": 1}}
    # another tenant's carol: only what bob holds himself (his imported copy), none of alice's agents
    other = [x for x in _lines(bob.download_subject_export("carol")) if x.get("type") == "memory"]
    assert {m["text"] for m in other} <= {"Carol's order ships to Lisbon."}
    assert {m["agent"] for m in other} <= {"copy"}


def test_plain_jsonl_goes_through_the_ordinary_write(clients: dict[str, Client], tmp_path: Path) -> None:
    alice, bob = clients["alice"], clients["bob"]
    path = tmp_path / "notes.jsonl"
    rows = [
        {"text": "The wifi password rotates monthly."},
        {"text": "Eve's phone is 555-0101.", "subject": "eve", "metadata": {"src": "crm"}},
        {"text": "Standup is at 9:30.", "kind": "event"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    first = alice.import_file("notes", path)
    assert (first["format"], first["memories_written"]) == ("jsonl", 3)
    assert alice.import_file("notes", path)["memories_written"] == 0
    texts = {m["text"] for m in alice.list_memories("notes", limit=50)["memories"]}
    assert len(texts) == 3 and "The wifi password rotates monthly." in texts
    with pytest.raises(ApiError) as err:
        bob.list_memories("notes")
    assert err.value.status == 404
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(rows[0]) + "\n" + json.dumps({"text": "x" * 400}) + "\n")
    with pytest.raises(ApiError) as err:
        alice.import_file("notes2", bad)
    assert err.value.status == 422 and "line 2" in str(err.value)
    with pytest.raises(ApiError):
        alice.list_memories("notes2")


def test_langgraph_items_read_back_through_the_store(clients: dict[str, Client], api: str, tenants: Any) -> None:
    pytest.importorskip("langgraph")
    from memworker.integrations.langgraph import MemworkerStore

    items = [
        {
            "namespace": ["prefs", "user-1"],
            "key": "food",
            "value": {"likes": "ramen", "dislikes": "olives"},
            "created_at": "2025-01-02T10:00:00+00:00",
            "updated_at": "2025-01-03T10:00:00+00:00",
        },
        {
            "namespace": ["prefs", "user-1"],
            "key": "music",
            "value": {"likes": "jazz"},
            "created_at": "2025-01-02T10:00:00+00:00",
            "updated_at": "2025-01-02T10:00:00+00:00",
        },
    ]
    data = "\n".join(json.dumps(i) for i in items).encode()
    report = clients["alice"].import_file("lg", data)
    assert (report["format"], report["memories_written"]) == ("langgraph", 2)
    assert clients["alice"].import_file("lg", data)["memories_written"] == 0
    with MemworkerStore(api, tenants["alice"]["key"], agent_id="lg") as store:
        got = store.get(("prefs", "user-1"), "food")
        assert got is not None and got.value == {"likes": "ramen", "dislikes": "olives"}
    with MemworkerStore(api, tenants["bob"]["key"], agent_id="lg") as store:
        assert store.get(("prefs", "user-1"), "food") is None


def test_cli_export_and_import(
    clients: dict[str, Client],
    source: str,
    api: str,
    tenants: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsysbinary: pytest.CaptureFixture[bytes],
) -> None:
    from memworker.cli import main

    host, port = api.removeprefix("http://").split(":")
    monkeypatch.setenv("MEMWORKER_API_HOST", host)
    monkeypatch.setenv("MEMWORKER_API_PORT", port)
    monkeypatch.setenv("MEMWORKER_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("MEMWORKER_API_KEY", tenants["alice"]["key"])
    assert main.main(["export", "--agent", source]) == 0
    data = capsysbinary.readouterr().out
    assert _lines(data)[0]["agent"] == source
    path = tmp_path / "src.ndjson"
    path.write_bytes(data)
    monkeypatch.setenv("MEMWORKER_API_KEY", tenants["charlie"]["key"])
    assert main.main(["import", str(path), "--agent", "from-cli", "--json"]) == 0
    report = json.loads(capsysbinary.readouterr().out)
    assert report["memories_written"] == sum(1 for x in _lines(data) if x.get("type") == "memory")
