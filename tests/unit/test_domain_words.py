"""One source for each domain word (memworker/domain/memories.py: Kind, Tier, EpisodeStatus): the
database's checks, the API's schemas, the CLI's choices and the console's filters list exactly
its values, and a word still travels as its plain string (JSON, error messages)."""

from __future__ import annotations

import enum
import importlib
import json
import re
from pathlib import Path
from typing import get_args

import pydantic
import pytest

from memworker import schemas
from memworker.api.console import pages
from memworker.cli.main import _parser
from memworker.domain.memories import EPISODE_STATUSES, KINDS, TIERS, EpisodeStatus, Kind, Tier
from memworker.lifecycle.governance import ReviewStatus
from memworker.lifecycle.retention import DUPLICATE, SweepStatus
from memworker.sleep.consolidation import BUSY, PassStatus

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = (ROOT / "sql" / "schema.sql").read_text()


def check_values(constraint: str) -> list[str]:
    """The values a `CHECK ((col = ANY (ARRAY['a'::text, ...])))` constraint allows, in order."""
    found = re.search(rf"CONSTRAINT {constraint} CHECK \(\(\w+ = ANY \(ARRAY\[([^\]]*)\]\)\)\)", SCHEMA)
    assert found, f"{constraint} not in sql/schema.sql"
    return re.findall(r"'([^']*)'::text", found.group(1))


def test_the_database_checks_list_exactly_the_enums_values() -> None:
    assert check_values("memories_tier_check") == [t.value for t in Tier]
    assert check_values("episodes_status_check") == [s.value for s in EpisodeStatus]
    # kinds are checked by the API's schemas, not the database: the column's default is one
    default = re.search(r"^\s+kind text DEFAULT '(\w+)'::text NOT NULL", SCHEMA, re.MULTILINE)
    assert default and default.group(1) in KINDS


def test_the_api_schemas_derive_from_the_enums() -> None:
    assert schemas.Kind is Kind and schemas.Tier is Tier and schemas.EpisodeStatus is EpisodeStatus
    # writes: every kind but the episodic layer's turns, every tier but L3 (the audited promote)
    assert set(get_args(schemas.WritableKind)) == set(Kind) - {Kind.TURN}
    assert set(get_args(schemas.WritableTier)) == set(Tier) - {Tier.L3}
    assert tuple(Kind) == KINDS and tuple(Tier) == TIERS and tuple(EpisodeStatus) == EPISODE_STATUSES


def test_the_cli_and_the_console_offer_exactly_the_enums_values() -> None:
    parser = _parser()
    for status in EpisodeStatus:
        assert parser.parse_args(["episodes", "list", "--status", status.value]).status == status
    with pytest.raises(SystemExit):
        parser.parse_args(["episodes", "list", "--status", "lost"])
    assert tuple(EpisodeStatus) == pages.STATUSES  # the console's filters and its table's columns
    assert pages.TIERS is TIERS and pages.KINDS is KINDS
    assert pages.choice("L2", pages.TIERS) == "L2" and pages.choice("turn", pages.KINDS) == "turn"
    assert pages.choice("L9", pages.TIERS) is None and pages.choice("dead", pages.STATUSES) == "dead"


def test_a_word_travels_as_its_plain_string() -> None:
    body = schemas.MemoryIn.model_validate({"text": "The user likes tea.", "kind": "preference", "tier": "L0"})
    assert body.kind == "preference" and body.tier == "L0"
    assert json.dumps(body.model_dump(include={"kind", "tier"})) == '{"kind": "preference", "tier": "L0"}'
    assert body.model_dump(mode="json", include={"kind", "tier"}) == {"kind": "preference", "tier": "L0"}
    assert f"{Tier.L3}" == str(Tier.L3) == "L3" and repr(Kind.FACT) == "'fact'"
    recall = schemas.RecallIn.model_validate({"query": "tea", "tiers": ["L3"], "kinds": ["turn"]})
    assert recall.model_dump(mode="json", include={"tiers", "kinds"}) == {"tiers": ["L3"], "kinds": ["turn"]}


def test_a_refused_word_is_named_by_its_values() -> None:
    with pytest.raises(pydantic.ValidationError) as refused:
        schemas.MemoryIn.model_validate({"text": "x", "tier": "L3"})
    assert "Input should be 'L0', 'L1' or 'L2'" in str(refused.value)
    with pytest.raises(pydantic.ValidationError) as refused:
        schemas.MemoryIn.model_validate({"text": "x", "kind": "turn"})
    assert "'fact', 'preference', 'decision', 'method', 'conclusion', 'event', 'insight' or 'summary'" in str(
        refused.value
    )
    with pytest.raises(pydantic.ValidationError) as refused:
        schemas.RecallIn.model_validate({"query": "x", "tiers": ["L4"]})
    assert "Input should be 'L0', 'L1', 'L2' or 'L3'" in str(refused.value)


def _enums() -> list[type[enum.Enum]]:
    """Every Enum defined in memworker's modules (imported, so they are all seen)."""
    found: list[type[enum.Enum]] = []
    for path in sorted((ROOT / "memworker").rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        if "integrations" in name or name.endswith("__main__"):
            continue  # optional dependencies; they define no domain word
        module = importlib.import_module(name)
        found += [
            v
            for v in vars(module).values()
            if isinstance(v, type) and issubclass(v, enum.Enum) and v.__module__ == name
        ]
    return found


def test_every_status_the_database_checks_is_an_enum() -> None:
    """A constrained word (each `<table>_status_check` of sql/schema.sql) is one Enum in the code,
    with exactly the database's values in its order: no status is a bare string list."""
    checks = re.findall(r"CONSTRAINT (\w+_status_check) CHECK", SCHEMA)
    assert len(checks) >= 7
    enums = {tuple(str(m.value) for m in e): e for e in _enums()}
    missing = [c for c in checks if tuple(check_values(c)) not in enums]
    assert not missing, f"statuses the database checks with no Enum of exactly their values: {missing}"


def test_the_run_and_review_statuses_are_the_databases() -> None:
    """A consolidation run's, a retention sweep's and a review's status: exactly the values the
    database checks; a report's busy (sleep) and duplicate (retention) are never stored."""
    assert check_values("consolidation_runs_status_check") == [s.value for s in PassStatus]
    assert check_values("retention_runs_status_check") == [s.value for s in SweepStatus]
    assert check_values("memory_reviews_status_check") == [s.value for s in ReviewStatus]
    assert BUSY not in [s.value for s in PassStatus] and DUPLICATE not in [s.value for s in SweepStatus]
    assert json.dumps({"status": PassStatus.DONE}) == '{"status": "done"}'
