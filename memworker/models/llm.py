"""The LLM provider interface, its OpenAI-compatible implementation, and the tolerant
JSON parser every LLM step shares (code fences, prose around the JSON, list vs object)."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from memworker import errors
from memworker.settings import Settings


@dataclass(frozen=True)
class Completion:
    text: str
    tokens_in: int
    tokens_out: int
    latency_ms: int


class LLM(Protocol):
    name: str

    def complete(self, system: str, user: str) -> Completion:
        """One chat completion. Raises TransientError (timeouts, 5xx) or PermanentError."""
        ...


class OpenAICompatible:
    """POST {base_url}/chat/completions, as OpenAI, vLLM, Ollama and llama.cpp serve it."""

    def __init__(self, base_url: str, model: str, api_key: str | None, timeout_s: float) -> None:
        self.name = f"openai:{model}"
        self.model = model
        self._client = httpx.Client(
            base_url=base_url.rstrip("/"),
            timeout=timeout_s,
            headers={"Authorization": f"Bearer {api_key}"} if api_key else {},
        )

    def complete(self, system: str, user: str) -> Completion:
        started = time.monotonic()
        try:
            resp = self._client.post(
                "/chat/completions",
                json={
                    "model": self.model,
                    "temperature": 0,
                    "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
                },
            )
        except httpx.TimeoutException as exc:
            raise errors.TransientError(f"llm timeout after {self._client.timeout.read}s") from exc
        except httpx.HTTPError as exc:
            raise errors.TransientError(f"llm unreachable: {exc}") from exc
        latency = int((time.monotonic() - started) * 1000)
        if resp.status_code >= 500 or resp.status_code == 429:
            raise errors.TransientError(f"llm answered {resp.status_code}")
        if resp.status_code >= 400:
            raise errors.PermanentError(f"llm answered {resp.status_code}: {resp.text[:200]}")
        try:
            body = resp.json()
            text = body["choices"][0]["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise errors.PermanentError("llm answer is not a chat completion") from exc
        usage = body.get("usage") or {}
        return Completion(
            str(text), int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0), latency
        )

    def close(self) -> None:
        self._client.close()


_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)


def for_settings(settings: Settings) -> LLM | None:
    """The configured endpoint (MEMWORKER_LLM_*), or None: offline, the rules do the work."""
    if not settings.llm_base_url:
        return None
    return OpenAICompatible(settings.llm_base_url, settings.llm_model, settings.llm_api_key, settings.llm_timeout_s)


def parse_json(raw: str, *, want: type = list) -> Any:
    """The JSON value inside an LLM answer. want=list also accepts {"items": [...]}-style
    objects and a single object; raises ValueError when there is nothing usable."""
    if not raw or not raw.strip():
        raise ValueError("empty answer")
    fenced = _FENCE.search(raw)
    text = fenced.group(1) if fenced else raw
    value = _first_json(text)
    if want is list:
        if isinstance(value, list):
            return value
        if isinstance(value, dict):
            for v in value.values():
                if isinstance(v, list):
                    return v
            return [value]
        raise ValueError("answer holds no JSON list")
    if want is dict and not isinstance(value, dict):
        raise ValueError("answer holds no JSON object")
    return value


def _first_json(text: str) -> Any:
    decoder = json.JSONDecoder()
    for i, ch in enumerate(text):
        if ch in "[{":
            try:
                value, _ = decoder.raw_decode(text, i)
                return value
            except json.JSONDecodeError:
                continue
    raise ValueError("no JSON found in answer")
