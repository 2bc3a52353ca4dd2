"""The one error hierarchy. Messages say what went wrong and what to do. Tasks retry a
TransientError with backoff and never a PermanentError (tasks/ingest_tasks.py)."""

from __future__ import annotations


class MemworkerError(Exception):
    """Base class for every error memworker raises on purpose."""


class TransientError(MemworkerError):
    """A step failed in a way that may succeed on retry (timeouts, 5xx, lost connections)."""


class PermanentError(MemworkerError):
    """A step failed in a way that will fail again; do not retry."""


class ConfigError(MemworkerError):
    """A setting is missing or malformed; the message names the variable."""


class NotFound(MemworkerError):
    """The object does not exist for this tenant (other tenants' objects are 'not found' too)."""


class Unauthorized(MemworkerError):
    """No valid API key (HTTP 401)."""


class Forbidden(MemworkerError):
    """The key is valid but lacks the scope (HTTP 403)."""


class InvalidInput(PermanentError):
    """The request is well-formed JSON but breaks a rule; nothing was written."""


class Conflict(MemworkerError):
    """The object is in a state that forbids the change (an archived session, a stale
    revision); re-read it and retry (HTTP 409)."""


class PayloadTooLarge(InvalidInput):
    """A body, content or batch over its limit (HTTP 413)."""


class RateLimited(MemworkerError):
    """Too many requests for this key or tenant (HTTP 429 with Retry-After)."""

    def __init__(self, retry_after_s: float) -> None:
        super().__init__(f"rate limit exceeded; retry after {retry_after_s:.2f}s")
        self.retry_after_s = retry_after_s


class StorageError(MemworkerError):
    """Postgres failed in a way the caller cannot fix by changing its input."""


class Unavailable(StorageError, TransientError):
    """Postgres or Redis is down; try again later (HTTP 503; a task retries with backoff)."""


class EmbeddingDimensionMismatch(ConfigError):
    """The embedding model's dimension differs from the schema's vector column."""


class MigrationError(MemworkerError):
    """A migration failed or an applied migration file was edited."""


class AlreadyRunning(MemworkerError):
    """Another `memworker up` holds this data directory."""
