"""docs/crewai.md's example runs as written against the real API and prints what it says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[3] / "docs" / "crewai.md"


def test_the_docs_example_runs(api: str, keys: list[str]) -> None:
    example = DOC.read_text().split("## Example", 1)[1]
    code = re.search(r"```python\n(.*?)```", example, re.S)
    assert code is not None
    env = {**os.environ, "MEMWORKER_URL": api, "MEMWORKER_API_KEY": keys[1]}
    for name in ("CREWAI_TRACING_ENABLED", "CREWAI_DISABLE_TELEMETRY"):
        env.pop(name, None)  # the example sets what it needs itself
    run = subprocess.run([sys.executable, "-c", code.group(1)], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    first = next(line for line in run.stdout.splitlines() if re.match(r"\d\.\d\d ", line))
    assert first.endswith("/clients/acme The client wants every invoice as a PDF attachment. {'client': 'acme'}")
    assert "/clients (1 records)" in run.stdout and "/eng (1 records)" in run.stdout
