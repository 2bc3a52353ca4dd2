"""Sleep's proposals to shared pools, by policy (pools_propose): 'review' queues a proposal a
person approves or rejects and leaves the pool untouched until then; 'auto' shares at once;
'off' does neither. Approving is idempotent and writes one copy naming every source; a
rejected fact is not proposed (nor shared automatically) again; erasing a source drops its
proposals; proposals never cross tenants and a limited key sees only what it reaches. "The
same fact" is judged as dedup judges it: other words for it count, a changed value, a negation
or swapped roles do not, and a subject's memory is never pooled. Real API, Postgres, embedder
and a real sleep pass."""

from __future__ import annotations

import uuid
from typing import Any
from uuid import UUID

import httpx
import numpy as np
import pytest

from memworker import keys
from memworker.cli import main as cli
from memworker.domain.policy import Policy
from memworker.fleet import matches, pools
from memworker.sdk import ApiError, Client
from memworker.sleep import consolidation
from memworker.storage import core_db, db

LESSON = "Restarting the billing worker clears the stuck invoice queue."


def _key(stack: dict[str, Any], tenant_id: Any, **kw: Any) -> str:
    with db.connect(stack["owner_url"]) as conn:
        db.bind_tenant(conn, tenant_id)
        key, _ = keys.create(conn, tenant_id=tenant_id, **kw)
    return key


def _propose(stack: dict[str, Any], tenant: Any, agent: str, ids: list[str], policy: Policy) -> int:
    """What a sleep pass of the agent does with these memories (pools.propose), committed."""
    with db.connect(stack["app_url"]) as conn:
        db.bind_tenant(conn, tenant)
        done = pools.propose(conn, tenant_id=tenant, agent_id=agent, ids=[UUID(i) for i in ids], policy=policy)
        conn.commit()
    return done


def _fails(status: int, call: Any) -> None:
    with pytest.raises(ApiError) as err:
        call()
    assert err.value.status == status, err.value


@pytest.fixture(scope="module")
def clients(api: str, tenants: dict[str, Any]) -> dict[str, Client]:
    return {name: Client(api, t["key"]) for name, t in tenants.items()}


@pytest.fixture(scope="module")
def proposed(stack: dict[str, Any], embedder: Any, tenants: dict[str, Any], clients: dict[str, Client]) -> Any:
    """A real sleep pass of 'night' under the default policy (review) finds LESSON, which
    'day' learnt too, and proposes it to the pool 'lessons'."""
    c, tenant = clients["alice"], tenants["alice"]["id"]
    assert c.set_policy({"pools_write": ["lessons"]}, agent_id="night")["effective"]["pools_propose"] == "review"
    mine = c.add_memories(
        "night",
        [{"text": t, "kind": "method"} for t in (LESSON, "Night shift starts at 22:00.", "The pager rotates weekly.")],
    )
    theirs = c.add_memory("day", LESSON, kind="method")
    pool = db.open_pool(stack["app_url"], max_size=2)
    try:
        with db.tenant_tx(pool, tenant) as conn:
            run_id = consolidation.request_run(conn, tenant_id=tenant, agent_id="night", trigger="test")
        report = consolidation.run_pass(
            pool, embedder, None, stack["settings"], tenant_id=tenant, agent_id="night", run_id=run_id
        )
    finally:
        pool.close()
    assert report.status == "done" and report.steps["pools"] == "1 proposed for review", report.steps
    ours = next(m for m in mine if m["text"] == LESSON)
    return {"mine": ours, "theirs": theirs}


def test_review_leaves_the_pool_untouched_until_approved(
    stack: dict[str, Any], tenants: dict[str, Any], clients: dict[str, Client], proposed: Any
) -> None:
    c, tenant = clients["alice"], tenants["alice"]["id"]
    mine, theirs = proposed["mine"], proposed["theirs"]
    assert c.pool_memories("lessons") == []
    assert [(p["pool"], p["memories"]) for p in c.pools()] == [("lessons", 0)]
    (prop,) = c.pool_proposals("lessons")
    assert prop["status"] == "open" and prop["text"] == LESSON and prop["agent_id"] == "night" and prop["live"]
    assert prop["sources"] == [f"memory:night/{mine['id']}", f"memory:day/{theirs['id']}"]
    # the next pass finds the same fact: no second proposal
    review = Policy(pools_write=("lessons",))
    assert _propose(stack, tenant, "night", [mine["id"]], review) == 0
    # a third agent that learnt it too adds itself to the open proposal
    third = c.add_memory("swing", LESSON, kind="method")
    assert _propose(stack, tenant, "swing", [third["id"]], review) == 1
    (prop,) = c.pool_proposals("lessons")
    assert set(prop["sources"]) == {
        f"memory:{a}/{m['id']}" for a, m in (("night", mine), ("day", theirs), ("swing", third))
    }
    assert c.pool_memories("lessons") == []

    first = c.approve_pool_proposal("lessons", prop["id"], reason="checked with ops")
    assert first["outcome"] == "copied" and first["proposal"]["status"] == "approved"
    assert first["proposal"]["reason"] == "checked with ops" and first["proposal"]["decided_by"].startswith("key:")
    copy = first["memory"]
    assert copy["text"] == LESSON and copy["provenance"][0] == f"memory:night/{mine['id']}"
    assert set(prop["sources"]) <= set(copy["provenance"])
    again = c.approve_pool_proposal("lessons", prop["id"])
    assert again["outcome"] == "already approved" and again["memory"]["id"] == copy["id"]
    assert [m["id"] for m in c.pool_memories("lessons")] == [copy["id"]]
    _fails(409, lambda: c.reject_pool_proposal("lessons", prop["id"]))
    assert c.pool_proposals("lessons") == []
    assert [p["id"] for p in c.pool_proposals("lessons", status="approved")] == [prop["id"]]
    # decided: the next pass does not propose it again
    assert _propose(stack, tenant, "day", [theirs["id"]], review) == 0
    assert c.pool_proposals("lessons") == []


def test_a_rejection_is_final_and_bad_requests_change_nothing(
    api: str, stack: dict[str, Any], tenants: dict[str, Any], clients: dict[str, Client]
) -> None:
    c, tenant = clients["alice"], tenants["alice"]["id"]
    fact = "Invoices over 10000 euros need a second approver."
    mine = c.add_memory("night", fact, kind="fact")
    c.add_memory("day", fact, kind="fact")
    assert _propose(stack, tenant, "night", [mine["id"]], Policy(pools_write=("policies",))) == 1
    (prop,) = c.pool_proposals("policies")
    _fails(404, lambda: c.approve_pool_proposal("policies", str(uuid.uuid4())))
    _fails(404, lambda: c.reject_pool_proposal("policies", str(uuid.uuid4())))
    _fails(404, lambda: c.approve_pool_proposal("lessons", prop["id"]))  # another pool's id
    _fails(404, lambda: c.pool_proposals("nowhere"))
    _fails(422, lambda: c.approve_pool_proposal("policies", "not-a-uuid"))
    _fails(422, lambda: c.pool_proposals("policies", status="pending"))
    auth = {"Authorization": f"Bearer {tenants['alice']['key']}"}
    r = httpx.post(f"{api}/v1/pools/policies/proposals/{prop['id']}/approve", json={"keep": "x"}, headers=auth)
    assert r.status_code == 422
    assert [p["status"] for p in c.pool_proposals("policies")] == ["open"]

    rejected = c.reject_pool_proposal("policies", prop["id"], reason="not a policy")["proposal"]
    assert rejected["status"] == "rejected" and rejected["reason"] == "not a policy"
    assert c.reject_pool_proposal("policies", prop["id"])["proposal"] == rejected  # the same answer
    _fails(409, lambda: c.approve_pool_proposal("policies", prop["id"]))
    assert c.pool_memories("policies") == []
    assert [p["status"] for p in c.pool_proposals("policies", status="rejected")] == ["rejected"]
    # neither proposed again nor shared automatically once rejected
    assert _propose(stack, tenant, "night", [mine["id"]], Policy(pools_write=("policies",))) == 0
    assert _propose(stack, tenant, "night", [mine["id"]], Policy(pools_write=("policies",), pools_propose="auto")) == 0
    assert c.pool_memories("policies") == [] and c.pool_proposals("policies") == []


def test_auto_shares_at_once_and_off_writes_nothing(
    stack: dict[str, Any], tenants: dict[str, Any], clients: dict[str, Client]
) -> None:
    c, tenant = clients["charlie"], tenants["charlie"]["id"]
    fact = "The staging database is reset every Sunday night."
    mine = c.add_memory("owl", fact, kind="fact")
    theirs = c.add_memory("lark", fact, kind="fact")
    assert _propose(stack, tenant, "owl", [mine["id"]], Policy(pools_write=("ops",), pools_propose="off")) == 0
    alone = c.add_memory("owl", "Only owl knows the old build server's name.", kind="fact")
    assert _propose(stack, tenant, "owl", [alone["id"]], Policy(pools_write=("ops",))) == 0  # nobody else learnt it
    assert c.pools() == []  # not even created
    assert _propose(stack, tenant, "owl", [mine["id"]], Policy(pools_write=("ops",), pools_propose="auto")) == 1
    (shared,) = c.pool_memories("ops")
    assert shared["text"] == fact
    assert {f"memory:owl/{mine['id']}", f"memory:lark/{theirs['id']}"} <= set(shared["provenance"])
    assert c.pool_proposals("ops") == []
    # the policy field: three modes; true / false (its earlier form) read as auto / off
    assert c.set_policy({"pools_propose": True}, agent_id="owl")["effective"]["pools_propose"] == "auto"
    assert c.set_policy({"pools_propose": False}, agent_id="owl")["effective"]["pools_propose"] == "off"
    _fails(422, lambda: c.set_policy({"pools_propose": "sometimes"}, agent_id="owl"))
    assert c.policy("owl")["effective"]["pools_propose"] == "off"


def test_erasing_a_source_drops_its_proposals(
    stack: dict[str, Any], tenants: dict[str, Any], clients: dict[str, Client]
) -> None:
    c, tenant = clients["charlie"], tenants["charlie"]["id"]
    review = Policy(pools_write=("desk",))
    first, second = "Printer jams clear after a power cycle.", "The VPN drops when the laptop sleeps."
    a1, a2 = c.add_memory("owl", first, kind="method"), c.add_memory("owl", second, kind="method")
    b1, b2 = c.add_memory("lark", first, kind="method"), c.add_memory("lark", second, kind="method")
    assert _propose(stack, tenant, "owl", [a1["id"], a2["id"]], review) == 2
    by_text = {p["text"]: p for p in c.pool_proposals("desk")}
    receipt = c.forget("lark", memory_ids=[b1["id"]])  # the other agent's source
    assert receipt["pool_proposals"]["ids"] == [by_text[first]["id"]]
    assert [p["text"] for p in c.pool_proposals("desk")] == [second]
    c.delete_memory("owl", a2["id"])  # the proposing agent's own memory, by the delete route
    assert c.pool_proposals("desk", status="open") == []
    assert c.pool_memories("desk") == []
    assert b2["id"]  # its own memory stays: only the proposal went
    assert [m["id"] for m in c.list_memories("lark", limit=50)["memories"] if m["text"] == second] == [b2["id"]]


def test_proposals_never_cross_tenants_and_limited_keys_see_what_they_reach(
    api: str, stack: dict[str, Any], tenants: dict[str, Any], clients: dict[str, Client], proposed: Any
) -> None:
    c, alice = clients["alice"], tenants["alice"]["id"]
    fact = "Refund disputes go to the finance queue first."
    mine = c.add_memory("night", fact, kind="fact")
    c.add_memory("day", fact, kind="fact")
    assert _propose(stack, alice, "night", [mine["id"]], Policy(pools_write=("lessons",))) == 1
    (prop,) = c.pool_proposals("lessons")
    bob = clients["bob"]
    _fails(404, lambda: bob.pool_proposals("lessons"))
    bob.add_pool_memory("lessons", "Bob's own pool of the same name.")
    assert bob.pool_proposals("lessons") == []
    _fails(404, lambda: bob.approve_pool_proposal("lessons", prop["id"]))
    _fails(404, lambda: bob.reject_pool_proposal("lessons", prop["id"]))
    with db.connect(stack["app_url"]) as conn:  # row-level security: bob's transactions see none of it
        db.bind_tenant(conn, tenants["bob"]["id"])
        assert conn.execute("SELECT count(*) AS n FROM memworker.pool_proposals").fetchone()["n"] == 0
    agent_only = Client(api, _key(stack, alice, agent_ids=["night"]))
    _fails(404, lambda: agent_only.pool_proposals("lessons"))
    _fails(404, lambda: agent_only.approve_pool_proposal("lessons", prop["id"]))
    pool_only = Client(api, _key(stack, alice, agent_ids=["pool~lessons"]))
    assert pool_only.pool_proposals("lessons") == []  # a proposal shows an agent's memory it does not reach
    _fails(404, lambda: pool_only.approve_pool_proposal("lessons", prop["id"]))
    reader = Client(api, _key(stack, alice, agent_ids=["night", "pool~lessons"], scopes=("memories:read",)))
    assert [p["id"] for p in reader.pool_proposals("lessons")] == [prop["id"]]
    _fails(403, lambda: reader.approve_pool_proposal("lessons", prop["id"]))
    assert [p["status"] for p in c.pool_proposals("lessons")] == ["open"]
    both = Client(api, _key(stack, alice, agent_ids=["night", "pool~lessons"]))
    assert both.reject_pool_proposal("lessons", prop["id"])["proposal"]["status"] == "rejected"


def test_the_cli_lists_and_decides_proposals(
    api: str,
    stack: dict[str, Any],
    tenants: dict[str, Any],
    clients: dict[str, Client],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    c, tenant = clients["charlie"], tenants["charlie"]["id"]
    fact = "Deploys are frozen on the last Friday of the quarter."
    mine = c.add_memory("owl", fact, kind="fact")
    c.add_memory("lark", fact, kind="fact")
    assert _propose(stack, tenant, "owl", [mine["id"]], Policy(pools_write=("cli",))) == 1
    host, port = api.removeprefix("http://").rsplit(":", 1)
    monkeypatch.setenv("MEMWORKER_API_HOST", host)
    monkeypatch.setenv("MEMWORKER_API_PORT", port)
    monkeypatch.setenv("MEMWORKER_API_KEY", tenants["charlie"]["key"])
    monkeypatch.setenv("MEMWORKER_DATA_DIR", str(stack["settings"].data_dir / "cli"))
    assert cli.main(["proposals", "list", "--pool", "cli"]) == 0
    listed = capsys.readouterr().out
    assert fact in listed and "owl (+1 more)" in listed
    (prop,) = c.pool_proposals("cli")
    # neither agent's own policy names the pool (the pass above was given one that did): refused
    assert cli.main(["proposals", "approve", "--pool", "cli", prop["id"]]) == 1
    assert "pools_write" in capsys.readouterr().err and c.pool_memories("cli") == []
    c.set_policy({"pools_write": ["cli"]}, agent_id="lark")  # the other source's agent may share it
    assert cli.main(["proposals", "approve", "--pool", "cli", prop["id"]]) == 0
    assert "approved: copied" in capsys.readouterr().out
    (copy,) = c.pool_memories("cli")
    assert copy["text"] == fact and copy["provenance"][0].startswith("memory:lark/")
    assert f"memory:owl/{mine['id']}" in copy["provenance"]
    assert cli.main(["proposals", "reject", "--pool", "cli", prop["id"]]) == 1  # approved: refused, said so
    assert "approved" in capsys.readouterr().err


def _cosine(embedder: Any, a: str, b: str) -> float:
    va, vb = embedder.embed([a, b])
    return float(np.dot(va, vb) / (np.linalg.norm(va) * np.linalg.norm(vb)))


def test_one_fact_in_other_words_is_one_proposal_with_every_source(
    stack: dict[str, Any], tenants: dict[str, Any], clients: dict[str, Client]
) -> None:
    c, tenant = clients["bob"], tenants["bob"]["id"]
    review = Policy(pools_write=("runbook",))
    north = c.add_memory("north", "The deploy script does not run on Fridays.", kind="fact")
    south = c.add_memory("south", "The deploy script never runs on Fridays.", kind="decision")  # one family
    assert _propose(stack, tenant, "north", [north["id"]], review) == 1
    (prop,) = c.pool_proposals("runbook")
    assert prop["text"] == north["text"] and prop["agent_id"] == "north"
    assert prop["sources"] == [f"memory:north/{north['id']}", f"memory:south/{south['id']}"]
    assert _propose(stack, tenant, "south", [south["id"]], review) == 0  # its pass: the same fact, proposed
    east = c.add_memory("east", "The deploy script doesn't run on Fridays.", kind="fact")
    assert _propose(stack, tenant, "east", [east["id"]], review) == 1  # a third wording joins it
    (joined,) = c.pool_proposals("runbook")
    assert joined["id"] == prop["id"] and len(joined["sources"]) == 3
    assert f"memory:east/{east['id']}" in joined["sources"]

    c.reject_pool_proposal("runbook", prop["id"], reason="not for everyone")
    west = c.add_memory("west", "The deploy script never runs on Fridays.", kind="fact")
    assert _propose(stack, tenant, "west", [west["id"]], review) == 0
    assert _propose(stack, tenant, "west", [west["id"]], Policy(pools_write=("runbook",), pools_propose="auto")) == 0
    assert c.pool_proposals("runbook") == [] and c.pool_memories("runbook") == []
    # a wording that names none of the proposal's memories, nor has its words, still finds
    # the rejected proposal: by its vector, confirmed by the words
    with db.connect(stack["app_url"]) as conn:
        db.bind_tenant(conn, tenant)
        (mine,) = core_db.pool_examined(
            conn, tenant_id=tenant, agent_id="west", ids=[UUID(west["id"])], kinds=["fact"], limit=1
        )
        held = matches.proposal(
            conn, tenant_id=tenant, pool="pool~runbook", finding=matches.Finding("west", mine, ()), policy=review
        )
    assert held is not None and (str(held.id), held.status, held.linked) == (prop["id"], "rejected", False)


def test_a_changed_value_a_negation_or_swapped_roles_is_another_fact(
    stack: dict[str, Any], embedder: Any, tenants: dict[str, Any], clients: dict[str, Client]
) -> None:
    c, tenant = clients["bob"], tenants["bob"]["id"]
    review = Policy(pools_write=("stack",))
    pairs = [
        ("The search cluster runs Elasticsearch 7.", "The search cluster runs Elasticsearch 8."),
        ("The backup job runs on Sundays.", "The backup job does not run on Sundays."),
        ("The payments team reports to the platform team.", "The platform team reports to the payments team."),
    ]
    for older, newer in pairs:  # the vectors alone would take each pair for one fact
        assert _cosine(embedder, older, newer) >= review.dedup_restated_similarity, (older, newer)
    left = c.add_memories("left", [{"text": a, "kind": "fact"} for a, _ in pairs])
    c.add_memories("right", [{"text": b, "kind": "fact"} for _, b in pairs])
    # the same words, but a method is not a fact: another kind family
    c.add_memory("right", "Rotate the search cluster's keys every quarter.", kind="fact")
    method = c.add_memory("left", "Rotate the search cluster's keys every quarter.", kind="method")
    assert _propose(stack, tenant, "left", [m["id"] for m in [*left, method]], review) == 0
    assert "stack" not in [p["pool"] for p in c.pools()]
    # the same value, said by a third agent in other words: proposed, without the other value
    third = c.add_memory("third", "The search cluster now runs Elasticsearch 7.", kind="fact")
    assert _propose(stack, tenant, "third", [third["id"]], review) == 1
    (prop,) = c.pool_proposals("stack")
    assert prop["sources"] == [f"memory:third/{third['id']}", f"memory:left/{left[0]['id']}"]


def test_a_subject_memory_is_never_proposed(
    stack: dict[str, Any], tenants: dict[str, Any], clients: dict[str, Client]
) -> None:
    c, tenant = clients["bob"], tenants["bob"]["id"]
    text = "The customer wants every invoice as a PDF attachment."
    a = c.add_memory("north", text, kind="preference", subject="cust-1")
    b = c.add_memory("south", text, kind="preference", subject="cust-1")
    general = c.add_memory("east", text, kind="preference")
    for mode in ("review", "auto"):
        policy = Policy(pools_write=("people",), pools_propose=mode)
        assert _propose(stack, tenant, "north", [a["id"]], policy) == 0  # about one person
        assert _propose(stack, tenant, "south", [b["id"]], policy) == 0
        assert _propose(stack, tenant, "east", [general["id"]], policy) == 0  # the others' are a subject's
    assert "people" not in [p["pool"] for p in c.pools()]


def test_a_proposal_whose_proposing_memory_is_gone_still_lists_and_approves(
    stack: dict[str, Any], tenants: dict[str, Any], clients: dict[str, Client]
) -> None:
    """Retention may remove the proposing agent's memory (an expiry, a cap); the proposal then
    shows no text, and approving it shares another live source's."""
    c, tenant = clients["charlie"], tenants["charlie"]["id"]
    fact = "Badge readers on floor three reset at midnight."
    gone = c.add_memory("wren", fact, kind="fact")
    kept = c.add_memory("finch", fact, kind="fact")
    assert _propose(stack, tenant, "wren", [gone["id"]], Policy(pools_write=("floors",))) == 1
    with db.connect(stack["owner_url"]) as conn:  # as a retention sweep removes a row
        db.bind_tenant(conn, tenant)
        conn.execute("DELETE FROM memworker.memories WHERE id = %s", (gone["id"],))
    (prop,) = c.pool_proposals("floors")
    assert prop["text"] is None and prop["kind"] is None
    c.set_policy({"pools_write": ["floors"]}, agent_id="finch")
    done = c.approve_pool_proposal("floors", prop["id"])
    assert done["memory"]["text"] == fact
    assert f"memory:finch/{kept['id']}" in done["memory"]["provenance"]
    assert [p["status"] for p in c.pool_proposals("floors", status="all")] == ["approved"]
