"""Tracing end to end (docs/tracing.md): a real API process and a real worker process export
OTLP/HTTP to a tiny collector in this test process (an http.server decoding the
ExportTraceServiceRequest protobufs), and one episode is one trace: the API's server span of
the POST, its publish span, the worker's Celery run span of memworker.ingest, the manual
reflect/embed/store spans and the SQL spans of both processes."""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan

from tests.conftest import start_api, start_worker, stop_worker

SECRET = "the vault code is 7731-ZEBRA"  # episode content: must never reach a span


@dataclass(frozen=True)
class Span:
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    kind: int
    service: str
    attributes: dict[str, Any]


class Collector:
    """An OTLP/HTTP traces receiver (POST /v1/traces, application/x-protobuf)."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.posts = 0
        lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                with lock:
                    collector.posts += 1
                    collector.spans += _decode(request) if self.path == "/v1/traces" else []
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *_: Any) -> None:  # quiet: pytest shows stderr on failure
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def trace(self, trace_id: str) -> list[Span]:
        return [s for s in self.spans if s.trace_id == trace_id]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


def _decode(request: ExportTraceServiceRequest) -> list[Span]:
    out = []
    for rs in request.resource_spans:
        resource = {a.key: _value(a.value) for a in rs.resource.attributes}
        for ss in rs.scope_spans:
            for s in ss.spans:
                out.append(
                    Span(
                        s.trace_id.hex(),
                        s.span_id.hex(),
                        s.parent_span_id.hex(),
                        s.name,
                        s.kind,
                        str(resource.get("service.name")),
                        {a.key: _value(a.value) for a in s.attributes},
                    )
                )
    return out


@pytest.fixture(scope="module")
def traced(stack: dict[str, Any]) -> Iterator[tuple[Collector, str]]:
    """The collector, and the base URL of a traced API whose episodes a traced worker stores."""
    collector = Collector()
    env = {
        "MEMWORKER_OTEL_ENDPOINT": collector.url,  # the base URL: /v1/traces is appended
        "OTEL_BSP_SCHEDULE_DELAY": "200",  # export every 0.2 s, not every 5 s
        "OTEL_SDK_DISABLED": "false",
    }
    worker = start_worker(stack["settings"], "otel-w", extra_env=env, queues="ingest")
    try:
        api, url = start_api(stack["settings"], "otel-api", extra_env=env)
        try:
            yield collector, url
        finally:
            stop_worker(api)
    finally:
        stop_worker(worker)
        collector.close()


def _statement(span: Span) -> str:
    return str(span.attributes.get("db.statement", ""))


def _stored(url: str, headers: dict[str, str], agent: str, episode_id: str) -> None:
    deadline = time.monotonic() + 90
    status = ""
    while time.monotonic() < deadline:
        status = httpx.get(f"{url}/v1/agents/{agent}/episodes/{episode_id}", headers=headers, timeout=10).json()[
            "status"
        ]
        if status == "stored":
            return
        time.sleep(0.3)
    raise AssertionError(f"episode {episode_id} is {status!r}, not stored")


def _wait_for(collector: Collector, trace_id: str, names: set[str]) -> list[Span]:
    """The trace's spans once every name in names is among them (exports arrive in batches)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        spans = collector.trace(trace_id)
        if names <= {s.name for s in spans}:
            return spans
        time.sleep(0.2)
    got = sorted({s.name for s in collector.trace(trace_id)})
    raise AssertionError(f"trace {trace_id} lacks {sorted(names - set(got))}; has {got}")


def test_one_episode_is_one_trace_from_the_api_through_the_worker_to_sql(
    traced: tuple[Collector, str], tenants: dict[str, dict[str, Any]]
) -> None:
    collector, url = traced
    alice = {"Authorization": f"Bearer {tenants['alice']['key']}"}
    r = httpx.post(
        f"{url}/v1/agents/a1/episodes",
        json={"content": f"The user prefers dark mode in every editor. Also {SECRET}."},
        headers=alice,
        timeout=30,
    )
    assert r.status_code == 202, r.text
    # the API names the trace it opened (W3C trace-response): 00-<trace id>-<span id>-01
    version, trace_id, server_span_id, _ = r.headers["traceresponse"].split("-")
    assert version == "00" and len(trace_id) == 32
    _stored(url, alice, "a1", r.json()["episode_id"])

    post = "POST /v1/agents/{agent_id}/episodes"
    run = "run/memworker.ingest"
    spans = _wait_for(collector, trace_id, {post, "apply_async/memworker.ingest", run, "ingest.store"})
    by_name = {s.name: s for s in spans}

    server = by_name[post]
    assert server.kind == PbSpan.SPAN_KIND_SERVER and server.service == "memworker-api"
    assert server.span_id == server_span_id and server.parent_id == ""  # the root: no caller context
    assert server.attributes["http.route"] == "/v1/agents/{agent_id}/episodes"
    assert server.attributes.get("http.status_code", server.attributes.get("http.response.status_code")) == 202

    # the API's publish span is the Celery task's parent: the context crossed Redis in the message
    publish = by_name["apply_async/memworker.ingest"]
    assert publish.kind == PbSpan.SPAN_KIND_PRODUCER and publish.service == "memworker-api"
    task = by_name[run]
    assert task.kind == PbSpan.SPAN_KIND_CONSUMER and task.service == "memworker-worker"
    assert task.parent_id == publish.span_id

    # SQL spans (psycopg, through the pool's connections) on both sides of the queue
    sql = [s for s in spans if s.attributes.get("db.system") == "postgresql"]
    assert {s.service for s in sql} == {"memworker-api", "memworker-worker"}, sorted((s.service, s.name) for s in sql)
    assert all(s.kind == PbSpan.SPAN_KIND_CLIENT for s in sql)
    assert "--" not in {s.name for s in sql}  # named by their verb: queries start with /* name */
    accept = [s for s in sql if s.service == "memworker-api" and "INSERT INTO episodes" in _statement(s)]
    assert accept and all(s.parent_id == server.span_id for s in accept)
    worker_sql = [s for s in sql if s.service == "memworker-worker"]

    # the manual steps of the ingest task, children of its run span (directly or through claim)
    for step in ("ingest.claim", "ingest.reflect", "ingest.embed", "ingest.store"):
        assert step in by_name, step
        assert by_name[step].service == "memworker-worker"
    assert by_name["ingest.claim"].attributes["memworker.tenant_id"] == str(tenants["alice"]["id"])
    assert by_name["ingest.store"].parent_id == task.span_id
    (claim,) = [s for s in worker_sql if _statement(s).startswith("/* claim_episodes */")]
    assert claim.name == "WITH" and claim.parent_id == by_name["ingest.claim"].span_id
    stored = [s for s in worker_sql if _statement(s).startswith("/* finish_episode */")]
    assert stored and stored[0].parent_id == by_name["ingest.store"].span_id

    # one tree: every span but the root hangs from a span of the same trace
    ids = {s.span_id for s in spans}
    assert [s.name for s in spans if s.parent_id not in ids] == [post]

    # no tenant content in any span (statements carry placeholders, never parameters) and no
    # probe noise: start_api polled /healthz, which is excluded
    for s in collector.spans:
        assert not any("7731-ZEBRA" in str(v) for v in s.attributes.values()), s
        assert "healthz" not in s.name, s


def test_a_recall_joins_the_episodes_trace_when_the_client_passes_its_context(
    traced: tuple[Collector, str], tenants: dict[str, dict[str, Any]]
) -> None:
    """A recall is its own request, so its own trace; a client that sends the episode's
    traceresponse back as traceparent puts the recall in the episode's trace. Another
    tenant's episode is a trace of its own."""
    collector, url = traced
    bob = {"Authorization": f"Bearer {tenants['bob']['key']}"}
    r = httpx.post(
        f"{url}/v1/agents/b1/episodes",
        json={"content": "The user's favourite fruit is mango."},
        headers=bob,
        timeout=30,
    )
    assert r.status_code == 202, r.text
    context = r.headers["traceresponse"]
    trace_id = context.split("-")[1]
    _stored(url, bob, "b1", r.json()["episode_id"])

    hits = httpx.post(
        f"{url}/v1/agents/b1/recall",
        json={"query": "which fruit does the user like?"},
        headers={**bob, "traceparent": context},
        timeout=30,
    )
    assert hits.status_code == 200, hits.text
    assert any("mango" in h["text"] for h in hits.json()["memories"])
    assert hits.headers["traceresponse"].split("-")[1] == trace_id
    listed = httpx.get(  # a query string is tenants' content too: it stays out of the spans
        f"{url}/v1/agents/b1/memories",
        params={"metadata": '{"secret": "papaya-4411"}'},
        headers={**bob, "traceparent": context},
        timeout=30,
    )
    assert listed.status_code == 200, listed.text

    post, recall = "POST /v1/agents/{agent_id}/episodes", "POST /v1/agents/{agent_id}/recall"
    listing = "GET /v1/agents/{agent_id}/memories"
    spans = _wait_for(collector, trace_id, {post, "run/memworker.ingest", "ingest.store", recall, listing})
    assert not [s for s in spans if any("papaya-4411" in str(v) for v in s.attributes.values())]
    by_name = {s.name: s for s in spans}
    assert by_name[recall].parent_id == by_name[post].span_id  # the episode's server span
    (query,) = [s for s in spans if _statement(s).startswith("/* recall */")]
    assert query.parent_id == by_name[recall].span_id and query.service == "memworker-api"
    # bob's trace holds bob's work only: alice's episode (the test before) is another trace
    claims = [s for s in spans if s.name == "ingest.claim"]
    assert claims and all(s.attributes["memworker.tenant_id"] == str(tenants["bob"]["id"]) for s in claims)
