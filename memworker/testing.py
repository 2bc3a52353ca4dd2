"""Test helpers that ship with the package: a deterministic fake embedder and a scripted
OpenAI-compatible chat-completions server on loopback."""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

from memworker.domain import tokens


class FakeEmbedder:
    """Bag-of-terms vectors hashed into 384 dims: texts sharing words are similar."""

    dim = 384

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for term in tokens.tokenize(text) or [text]:
                h = int.from_bytes(hashlib.blake2b(term.encode(), digest_size=8).digest(), "big")
                out[i, h % self.dim] += 1.0 if (h >> 32) & 1 else -1.0
            norm = np.linalg.norm(out[i])
            out[i] = out[i] / norm if norm else 1.0 / np.sqrt(self.dim)
        return out


class FakeLLM:
    """A real HTTP server speaking POST /chat/completions with scripted answers.

    script() queues answers: a string (the message content), a function of the request body
    returning the content (an answer that depends on the prompt), ('status', code),
    ('sleep', seconds, content) or ('garbage', body). With nothing queued it answers
    `default`. Every request is recorded in .requests.

    Unscripted answers can be made slow and flaky (bench/soak.py): each waits a uniform
    `latency_s` range, then answers HTTP 500 with probability `fail_rate`, or with
    probability `hang_rate` waits `hang_s` more (longer than the client's timeout) first.
    .failures and .hangs count what was injected."""

    def __init__(
        self,
        default: str = '[{"text": "The user likes tea.", "type": "preference", "confidence": 0.8}]',
        *,
        echo: bool = False,
        latency_s: tuple[float, float] = (0.0, 0.0),
        fail_rate: float = 0.0,
        hang_rate: float = 0.0,
        hang_s: float = 0.0,
        seed: int = 0,
    ) -> None:
        self.default = default
        self.echo = echo  # answer with the episode's first sentence as the one memory
        self.latency_s, self.fail_rate, self.hang_rate, self.hang_s = latency_s, fail_rate, hang_rate, hang_s
        self.failures = self.hangs = 0
        self._rng = random.Random(seed)
        self.answers: deque[Any] = deque()
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                with fake._lock:
                    fake.requests.append(body)
                    chaos = fake._chaos() if not fake.answers else (0.0, None)
                    answer = (
                        fake.answers.popleft() if fake.answers else (fake._echo(body) if fake.echo else fake.default)
                    )
                if callable(answer):
                    answer = answer(body)
                time.sleep(chaos[0])
                if chaos[1] == "fail":
                    self._send(500, b'{"error": "injected failure"}')
                    return
                if isinstance(answer, tuple) and answer[0] == "status":
                    self._send(answer[1], b'{"error": "scripted failure"}')
                    return
                if isinstance(answer, tuple) and answer[0] == "sleep":
                    time.sleep(answer[1])
                    answer = answer[2]
                if isinstance(answer, tuple) and answer[0] == "garbage":
                    self._send(200, answer[1].encode())
                    return
                payload = {
                    "id": "fake",
                    "object": "chat.completion",
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}
                    ],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
                }
                self._send(200, json.dumps(payload).encode())

            def _send(self, code: int, body: bytes) -> None:
                try:
                    self.send_response(code)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def _chaos(self) -> tuple[float, str | None]:
        """(seconds to wait, 'fail' | 'hang' | None) for one unscripted answer (under the lock)."""
        delay = self._rng.uniform(*self.latency_s)
        roll = self._rng.random()
        if roll < self.fail_rate:
            self.failures += 1
            return delay, "fail"
        if roll < self.fail_rate + self.hang_rate:
            self.hangs += 1
            return delay + self.hang_s, "hang"
        return delay, None

    @staticmethod
    def _echo(body: dict[str, Any]) -> str:
        episode = body["messages"][-1]["content"].split("<<<", 1)[-1].strip()
        first = episode.split(". ")[0].strip(" >\n")[:270]
        return json.dumps([{"text": first, "type": "event", "confidence": 0.8}])

    def script(self, *answers: Any) -> None:
        with self._lock:
            self.answers.extend(answers)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
