from __future__ import annotations

from pathlib import Path

import pytest

from memworker import errors
from memworker.domain.policy import Policy
from memworker.settings import Settings


def test_defaults_mean_embedded_services() -> None:
    s = Settings.from_env({})
    assert s.database_url is None and s.redis_url is None
    assert s.data_dir == Path(".memworker")


def test_values_are_read_with_the_prefix() -> None:
    s = Settings.from_env(
        {
            "MEMWORKER_API_PORT": "9000",
            "MEMWORKER_LLM_TIMEOUT_S": "2.5",
            "MEMWORKER_REDIS_URL": "redis://h:1/0",
            "OTHER_API_PORT": "1",
        }
    )
    assert (s.api_port, s.llm_timeout_s, s.redis_url) == (9000, 2.5, "redis://h:1/0")


@pytest.mark.parametrize(
    "name,value",
    [
        ("MEMWORKER_API_PORT", "eighty"),
        ("MEMWORKER_API_PORT", "70000"),
        ("MEMWORKER_DATABASE_URL", "mysql://x"),
        ("MEMWORKER_REDIS_URL", "http://x"),
        ("MEMWORKER_DB_POOL_MAX", "0"),
        ("MEMWORKER_LOG_LEVEL", "LOUD"),
        ("MEMWORKER_WEBHOOK_ALLOW_HOSTS", "10.0.0.0/8, http://x"),
        ("MEMWORKER_WEBHOOK_TENANT_INFLIGHT", "0"),
    ],
)
def test_bad_values_fail_at_start_naming_the_variable(name: str, value: str) -> None:
    with pytest.raises(errors.ConfigError, match=name):
        Settings.from_env({name: value})


def test_secrets_stay_out_of_repr() -> None:
    s = Settings(llm_api_key="sk-secret", api_key="mwk_x_y")
    assert "sk-secret" not in repr(s) and "mwk_x_y" not in repr(s)


def test_policy_rejects_unknown_and_bad_fields_by_name() -> None:
    assert Policy.resolve({"recall_bm25_weight": 0.3}, {"ttl_l1_hours": None}).ttl_l1_hours is None
    with pytest.raises(errors.InvalidInput, match="nonsense"):
        Policy.resolve({"nonsense": 1})
    with pytest.raises(errors.InvalidInput, match="recall_vector_weight"):
        Policy.resolve({"recall_vector_weight": 7})
    with pytest.raises(errors.InvalidInput, match="recall_tiers"):
        Policy.resolve({"recall_tiers": ["L9"]})
