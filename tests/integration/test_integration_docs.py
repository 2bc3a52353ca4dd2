"""The Python examples of docs/integrations.md run as written against the real stack (the API
over HTTP, Postgres, Redis and a Celery worker process), each in a fresh interpreter with only
MEMWORKER_URL and MEMWORKER_API_KEY given. The CrewAI example needs CrewAI, which cannot share
memworker's environment: integrations/crewai/tests runs its page's example."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "integrations.md"
BLOCKS = [b for b in re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S) if "memworker_crewai" not in b]


def test_the_page_has_its_python_examples() -> None:
    assert len(BLOCKS) == 2, "the blocking/async example and the LangGraph one"


@pytest.mark.parametrize("code", BLOCKS, ids=["sdk", "langgraph"])
def test_an_example_runs(code: str, api: str, tenants: dict[str, Any], worker: Any, tmp_path: Path) -> None:
    env = {**os.environ, "MEMWORKER_URL": api, "MEMWORKER_API_KEY": tenants["alice"]["key"]}
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180
    )
    assert run.returncode == 0, run.stderr[-3000:]
    printed = run.stdout.lower()
    assert "email" in printed, run.stdout
