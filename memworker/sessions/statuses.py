"""The sessions capability's statuses: where a session is, where a plan's step is, where a
webhook delivery is. Each is the one list of its values (sql/schema.sql's checks, the API's
schemas and the CLI's choices follow it); a member is its plain string on the wire and in SQL."""

from __future__ import annotations

from memworker.domain.memories import Word


class SessionStatus(Word):
    """Open (it takes changes), or archived (closed into a snapshot until restored)."""

    OPEN = "open"
    ARCHIVED = "archived"


class StepStatus(Word):
    """Where a plan's step is; done and skipped steps are finished."""

    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    DONE = "done"
    BLOCKED = "blocked"
    SKIPPED = "skipped"


FINISHED = (StepStatus.DONE, StepStatus.SKIPPED)


class DeliveryStatus(Word):
    """Where a webhook delivery is: waiting for its next attempt, claimed by a sender, or
    finished (delivered, or failed for good)."""

    PENDING = "pending"
    SENDING = "sending"
    DELIVERED = "delivered"
    FAILED = "failed"
