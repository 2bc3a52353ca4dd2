"""The test fixtures destroy only what they made: on a server given by MEMWORKER_TEST_* they
refuse to drop a database or flush a Redis database they did not create, unless the test
owner opts in."""

from __future__ import annotations

from tests.conftest import ALLOW_DESTRUCTIVE, refusal


def test_a_server_this_session_started_is_ours_to_clean() -> None:
    assert refusal("db x", "MEMWORKER_TEST_DATABASE_URL", external=False, env={}) is None


def test_an_external_server_is_refused_with_the_way_out_named() -> None:
    why = refusal("the existing database t_x", "MEMWORKER_TEST_DATABASE_URL", external=True, env={})
    assert why is not None
    assert "t_x" in why and "MEMWORKER_TEST_DATABASE_URL" in why and f"{ALLOW_DESTRUCTIVE}=1" in why


def test_only_an_explicit_opt_in_allows_it() -> None:
    for value in ("0", "", "yes", "true"):
        assert refusal("x", "MEMWORKER_TEST_REDIS_URL", external=True, env={ALLOW_DESTRUCTIVE: value}) is not None
    assert refusal("x", "MEMWORKER_TEST_REDIS_URL", external=True, env={ALLOW_DESTRUCTIVE: "1"}) is None
