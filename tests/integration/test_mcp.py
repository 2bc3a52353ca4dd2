"""`memworker mcp` against the running stack (the real API over HTTP, Postgres, Redis and a
Celery worker process): an MCP client from the `mcp` SDK launches the server over stdio,
lists its tools, remembers an episode, recalls it and forgets it; sessions' working memory
and plans go through it; API errors arrive as tool errors with the API's message; the
streamable HTTP transport serves the same tools; one tenant's server sees nothing of another."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import CallToolResult

from memworker.local import embedded
from memworker.sdk import ApiError
from memworker.sdk import Client as ApiClient
from tests.conftest import stop_worker

ROOT = Path(__file__).resolve().parents[2]
AGENT = "support-bot"
AGENT_TOOLS = {
    "remember",
    "recall",
    "context",
    "forget",
    "open_session",
    "working_memory",
    "plan",
    "update_step",
    "share_memory",
}
# the fleet's tools that name no agent (pools and their proposals, recall across agents)
FLEET_TOOLS = {"recall_agents", "pools", "pool_memories", "pool_proposals", "approve_proposal", "reject_proposal"}
TOOLS = AGENT_TOOLS | FLEET_TOOLS


@asynccontextmanager
async def stdio(api: str, key: str, *extra: str) -> AsyncIterator[Client]:
    """An MCP client session with `python -m memworker mcp` launched over stdio."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memworker", "mcp", "--api-url", api, *extra],
        env={"MEMWORKER_API_KEY": key},
        cwd=ROOT,
    )
    async with Client(params, read_timeout_seconds=60) as client:
        yield client


def data(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def error_text(result: CallToolResult) -> str:
    assert result.is_error, result.structured_content
    text = " ".join(getattr(c, "text", "") for c in result.content)
    assert "Traceback" not in text and 'File "' not in text
    return text


def test_stdio_remember_recall_forget_with_a_real_worker(
    api: str, tenants: dict[str, Any], worker: Any, tmp_path: Path
) -> None:
    alice, bob = tenants["alice"]["key"], tenants["bob"]["key"]
    # bob (another tenant) has an agent of the same name and a memory on the same subject
    with ApiClient(api, bob) as b:
        bobs = b.add_memory(AGENT, "The customer prefers email for the billing ticket.")["id"]

    async def scenario() -> None:
        async with stdio(api, alice, "--agent", AGENT) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert set(tools) == TOOLS
            for t in tools.values():
                assert t.description and t.input_schema["type"] == "object"
                # bound to an agent: the argument is there, optional, defaulting to it
                assert "agent" not in t.input_schema.get("required", [])
                if t.name in AGENT_TOOLS:
                    assert t.input_schema["properties"]["agent"]["default"] == AGENT
            assert tools["recall"].annotations and tools["recall"].annotations.read_only_hint
            assert set(tools["recall"].input_schema["required"]) == {"query"}

            ep = data(
                await c.call_tool(
                    "remember",
                    {"content": "The customer prefers email over phone. Ticket 4411 is about SSO.", "wait": True},
                )
            )
            assert ep["status"] == "stored" and ep["memory_ids"], ep

            out = data(await c.call_tool("recall", {"query": "how does the customer want to be contacted?", "k": 5}))
            hits = out["memories"]
            assert hits and any("email" in h["text"] for h in hits)
            assert all(isinstance(h["score"], float) for h in hits)
            assert bobs not in {h["id"] for h in hits}  # another tenant's memory stays invisible
            explained = data(await c.call_tool("recall", {"query": "contact preference", "explain": True}))
            assert {"bm25", "vector", "fused"} <= set(explained["memories"][0]["signals"])

            mine = [h["id"] for h in hits if "email" in h["text"]]
            receipt = data(await c.call_tool("forget", {"memory_ids": [*mine, bobs]}))
            assert set(receipt["memories"]["ids"]) == set(mine)
            assert receipt["not_found"] == [bobs]  # bob's id is not alice's to erase
            after = data(await c.call_tool("recall", {"query": "how does the customer want to be contacted?"}))
            assert not set(mine) & {h["id"] for h in after["memories"]}

            # errors: the API's message as a tool error, never a traceback
            bad_id = error_text(await c.call_tool("forget", {"memory_ids": ["not-a-uuid"]}))
            assert "HTTP 422: memory_ids.0" in bad_id
            assert "bound to agent" in error_text(await c.call_tool("recall", {"agent": "other", "query": "x"}))
            assert "exactly one of" in error_text(await c.call_tool("remember", {"content": "a", "text": "b"}))

    anyio.run(scenario)
    with ApiClient(api, bob) as b:
        assert b.get_memory(AGENT, bobs)["id"] == bobs  # bob's memory is untouched


def test_stdio_sessions_working_memory_plan_and_context(api: str, tenants: dict[str, Any]) -> None:
    async def scenario() -> None:
        async with stdio(api, tenants["charlie"]["key"], "--agent", "planner") as c:
            s = data(await c.call_tool("open_session", {"session_id": "s-1", "goal": "migrate the billing database"}))
            assert s["session_id"] == "s-1"
            w = data(
                await c.call_tool(
                    "working_memory",
                    {
                        "session_id": "s-1",
                        "intent": "pick a maintenance window",
                        "add": [{"kind": "constraint", "text": "no downtime during business hours"}],
                    },
                )
            )
            assert w["intent"] == "pick a maintenance window"
            read = data(await c.call_tool("working_memory", {"session_id": "s-1"}))
            assert "no downtime during business hours" in str(read)
            milestones = [{"id": "m1", "title": "prepare", "steps": [{"id": "s1", "title": "snapshot"}]}]
            plan = data(await c.call_tool("plan", {"session_id": "s-1", "milestones": milestones, "title": "mig"}))
            assert plan["session_id"] == "s-1"
            data(await c.call_tool("update_step", {"session_id": "s-1", "step_id": "s1", "status": "done"}))
            assert "resume" in data(await c.call_tool("plan", {"session_id": "s-1"}))
            ctx = data(await c.call_tool("context", {"query": "what next?", "session_id": "s-1", "max_tokens": 400}))
            assert "no downtime during business hours" in ctx["context"] and ctx["tokens"] <= 400
            # a bound server reaches no other agent through an id that is a path ('../../other/...')
            for sneaky in ("../../other/memories?", "s-1/../../../other/memories"):
                assert "session_id" in error_text(await c.call_tool("plan", {"session_id": sneaky}))
            with ApiClient(api, tenants["charlie"]["key"]) as sdk:
                with pytest.raises(ApiError) as err:  # escaped: one (unknown) session, not a path
                    sdk.plan("planner", "../../other/memories?")
                assert err.value.status in (404, 422)
            # another tenant's server has no such session
        async with stdio(api, tenants["alice"]["key"], "--agent", "planner") as c:
            assert "HTTP 404" in error_text(await c.call_tool("working_memory", {"session_id": "s-1"}))

    anyio.run(scenario)


def test_a_missing_key_is_a_clear_error(
    api: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from memworker.cli import main as cli

    monkeypatch.delenv("MEMWORKER_API_KEY", raising=False)
    assert cli.main(["--data-dir", str(tmp_path), "mcp", "--api-url", api]) == 1
    assert "give --api-key or set MEMWORKER_API_KEY" in capsys.readouterr().err
    assert cli.main(["--data-dir", str(tmp_path), "mcp", "--agent", "no spaces"]) == 1
    assert "--agent 'no spaces'" in capsys.readouterr().err
    argv = ["--data-dir", str(tmp_path), "mcp", "--api-url", api, "--api-key", "k", "--transport", "http"]
    assert cli.main([*argv, "--host", "0.0.0.0"]) == 1  # no authentication of its own: loopback only
    assert "--allow-remote" in capsys.readouterr().err


MCP_TOKEN = "mcp-test-token-0123456789abcdef"


@asynccontextmanager
async def http(url: str, token: str = MCP_TOKEN) -> AsyncIterator[Client]:
    """An MCP client session over streamable HTTP, sending the server's bearer token."""
    transport = streamable_http_client(
        url, http_client=create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    )
    async with Client(transport) as client:
        yield client


@pytest.fixture()
def http_server(api: str, tenants: dict[str, Any], tmp_path: Path) -> Iterator[str]:
    """`memworker mcp --transport http` (not bound to an agent, its token MCP_TOKEN from a
    file) as a process; yields its URL. Its log is tmp_path/mcp.log."""
    port = embedded.free_port()
    log = open(tmp_path / "mcp.log", "wb")
    (tmp_path / "mcp-token").write_text(MCP_TOKEN + "\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "memworker", "mcp", "--transport", "http", "--port", str(port)]
        + ["--api-url", api, "--api-key", tenants["bob"]["key"], "--token-file", str(tmp_path / "mcp-token")],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 30
    while True:
        assert proc.poll() is None, (tmp_path / "mcp.log").read_text()
        try:
            httpx.get(url, timeout=1)
            break
        except httpx.HTTPError:
            assert time.monotonic() < deadline, "the MCP HTTP server did not start"
            time.sleep(0.2)
    yield url
    stop_worker(proc)


def test_streamable_http_transport(http_server: str, tmp_path: Path) -> None:
    # every request needs the server's own bearer token: none, a wrong one, a bare one: 401
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}
    for auth in ({}, {"Authorization": "Bearer wrong-token-0123456789"}, {"Authorization": MCP_TOKEN}):
        r = httpx.post(http_server, json=init, headers={**headers, **auth}, timeout=10)
        assert r.status_code == 401, (auth, r.status_code, r.text[:200])
        assert r.headers["www-authenticate"].startswith("Bearer")

    async def scenario() -> None:
        async with http(http_server) as c:  # with it: served
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert set(tools) == TOOLS
            # not bound: every tool that acts for an agent asks for it
            assert all("agent" in tools[name].input_schema["required"] for name in AGENT_TOOLS)
            assert "agent not found" in error_text(await c.call_tool("recall", {"agent": "nobody", "query": "x"}))
            # an argument the SDK client refuses before any request: a clean tool error too
            args = {"agent": "a", "session_id": "s-1", "step_id": "..", "status": "done"}
            assert "'..' is not a valid id" in error_text(await c.call_tool("update_step", args))

    anyio.run(scenario)
    log = (tmp_path / "mcp.log").read_text()
    assert "Traceback" not in log and "unexpected exception" not in log, log[-2000:]


def test_http_token_sources(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from memworker.cli import main as cli
    from memworker.cli import mcp as mcp_cli
    from memworker.settings import Settings

    parser = cli._parser()
    args = parser.parse_args(["mcp", "--transport", "http"])
    token, generated = mcp_cli.http_token(Settings(), args)
    assert generated and token and len(token) >= 32
    assert mcp_cli.http_token(Settings(mcp_token=MCP_TOKEN), args) == (MCP_TOKEN, False)
    assert mcp_cli.http_token(Settings(), parser.parse_args(["mcp", "--no-auth"])) == (None, False)
    (tmp_path / "short").write_text("short\n")
    argv = ["--data-dir", str(tmp_path), "mcp", "--api-url", "http://127.0.0.1:9", "--api-key", "k"]
    assert cli.main([*argv, "--transport", "http", "--token-file", str(tmp_path / "short")]) == 1
    assert "at least 16 characters" in capsys.readouterr().err
    assert cli.main([*argv, "--transport", "http", "--token-file", str(tmp_path / "short"), "--no-auth"]) == 1
    assert "not both" in capsys.readouterr().err


def test_a_server_bound_to_a_subject_reaches_no_other_subjects_session(api: str, tenants: dict[str, Any]) -> None:
    """Session ids are the caller's own and guessable: a server bound to cust-a is refused,
    on every session tool, a session of cust-b or a general one, and changes nothing there."""
    agent = "desk-bot"
    milestones = [{"id": "m1", "title": "verify", "steps": [{"id": "s1", "title": "check the invoice"}]}]
    with ApiClient(api, tenants["alice"]["key"]) as sdk:
        for sid, subject in (("chat-b", "cust-b"), ("chat-general", None)):
            sdk.create_session(agent, sid, goal=f"refund for {sid}", subject=subject)
            sdk.update_working(agent, sid, add=[{"kind": "constraint", "text": f"{sid}: card ends 4242"}])
            sdk.set_plan(agent, sid, milestones)
        before = {sid: (sdk.session(agent, sid), sdk.working(agent, sid)) for sid in ("chat-b", "chat-general")}

    foreign: list[tuple[str, dict[str, Any]]] = [
        ("open_session", {}),
        ("working_memory", {}),
        ("working_memory", {"intent": "read the other customer's card"}),
        ("plan", {}),
        ("plan", {"milestones": milestones}),
        ("update_step", {"step_id": "s1", "status": "done"}),
        ("context", {"query": "which card does the customer use?"}),
        ("remember", {"text": "The customer asked for a refund."}),
        ("remember", {"content": "The customer asked for a refund."}),
    ]

    async def scenario() -> None:
        async with stdio(api, tenants["alice"]["key"], "--agent", agent, "--subject", "cust-a") as c:
            for sid in ("chat-b", "chat-general"):
                for tool, args in foreign:
                    text = error_text(await c.call_tool(tool, {**args, "session_id": sid}))
                    assert "HTTP 403" in text and "cust-a" in text, (tool, sid, text)
                    assert "4242" not in text
            # its own sessions work as ever, and are its subject's
            own = data(await c.call_tool("open_session", {"session_id": "chat-a", "goal": "refund for cust-a"}))
            assert own["subject"] == "cust-a"
            data(await c.call_tool("working_memory", {"session_id": "chat-a", "intent": "check the invoice"}))
            data(await c.call_tool("plan", {"session_id": "chat-a", "milestones": milestones}))
            step = data(await c.call_tool("update_step", {"session_id": "chat-a", "step_id": "s1", "status": "done"}))
            assert step["milestones"][0]["steps"][0]["status"] == "done"
            ctx = data(await c.call_tool("context", {"query": "what next?", "session_id": "chat-a"}))
            assert "check the invoice" in ctx["context"]
            data(await c.call_tool("remember", {"text": "The refund is approved.", "session_id": "chat-a"}))

    anyio.run(scenario)
    with ApiClient(api, tenants["alice"]["key"]) as sdk:
        for sid, (session, working) in before.items():
            assert sdk.session(agent, sid)["revision"] == session["revision"]
            assert sdk.working(agent, sid) == working
            assert sdk.plan(agent, sid)["milestones"][0]["steps"][0]["status"] == "pending"
            assert sdk.context_calls(agent, sid) == []
        assert sdk.list_memories(agent, session="chat-b")["memories"] == []
        assert [e for e in sdk.list_episodes(agent_id=agent) if e.get("session_id") in before] == []


def test_the_server_reports_memworkers_version(api: str, tenants: dict[str, Any]) -> None:
    from importlib.metadata import version

    async def scenario() -> None:
        async with stdio(api, tenants["alice"]["key"]) as c:
            assert c.server_info.name == "memworker"
            assert c.server_info.version == version("memworker") != ""

    anyio.run(scenario)
