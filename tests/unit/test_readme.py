"""The README's tables are the operator's reference: they must name every setting with its
default, every policy field, and every route the API serves."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from memworker import settings
from memworker.api import app
from memworker.domain.policy import Policy

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_every_setting_is_in_the_configuration_table() -> None:
    for name, default in settings.describe():
        assert f"| `{name}` | {default} |" in README, name


def test_every_policy_field_is_in_the_policy_table() -> None:
    for f in dataclasses.fields(Policy):
        assert f"| `{f.name}` |" in README, f.name


def test_every_route_is_in_the_route_table() -> None:
    table = README[README.index("| route | what |") : README.index("## Architecture")]
    for router in app.ROUTERS:
        for route in router.routes:
            # rows abbreviate paths ("GET .../memories/{id}/history"); the last fixed segment
            # of every route must be there
            last = [s for s in route.path.split("/") if s and not s.startswith("{")][-1]
            assert last in table, route.path
