"""keys.bearer_token: the one parser of `Authorization: Bearer <token>`, used for API keys
(deps._principal), the metrics token (app._bearer_is) and the console's timing samples."""

from __future__ import annotations

import pytest

from memworker import keys


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer mwk_a_b", "mwk_a_b"),
        ("bearer mwk_a_b", "mwk_a_b"),
        ("BEARER  mwk_a_b ", "mwk_a_b"),
        ("Bearer", None),
        ("Bearer ", None),
        ("Bearer   ", None),
        ("", None),
        ("Basic dXNlcjpwdw==", None),
        ("Bearermwk_a_b", None),
        ("Token mwk_a_b", None),
    ],
)
def test_a_bearer_header_gives_its_token_and_anything_else_none(header: str, token: str | None) -> None:
    assert keys.bearer_token(header) == token
