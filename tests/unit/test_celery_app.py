"""The worker's Celery app is built on first use, never as a side effect of an import: the
API, the SDK and the CLI publish through their own Publisher's app and build no other."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# In a fresh interpreter with no MEMWORKER_* set (a worker's app could not resolve its broker):
# the publishers' modules import cleanly, and no app has been built.
IMPORTS = """
import tasks.celery_app as celery_app
import memworker.api.app, memworker.api.deps, memworker.sdk, memworker.cli.main, tasks.publish
assert celery_app.worker_app.cache_info().currsize == 0, "the worker's app was built on import"
assert tasks.publish.on_worker.cache_info().currsize == 0, "the worker's publisher was built on import"
print("ok")
"""

# Built on first use, from the environment, once; errors are the caller's to see.
FIRST_USE = """
import tasks.celery_app as celery_app
from memworker import errors
try:
    celery_app.app
except errors.ConfigError as exc:
    assert "MEMWORKER_REDIS_URL" in str(exc) or "MEMWORKER_DATABASE_URL" in str(exc), exc
else:
    raise AssertionError("a worker's app without a broker was built")
import os
os.environ["MEMWORKER_DATABASE_URL"] = "postgresql://nobody@127.0.0.1:1/x"
os.environ["MEMWORKER_REDIS_URL"] = "redis://127.0.0.1:1/0"
from celery.app.utils import find_app
app = find_app("tasks.celery_app")
assert app is celery_app.app is celery_app.worker_app()
assert app.conf.broker_url == "redis://127.0.0.1:1/0"
print("ok")
"""


def _run(code: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMWORKER_", "OTEL_"))}
    env["MEMWORKER_DATA_DIR"] = str(ROOT / "tests" / "no-such-stack")  # no `memworker up` to fall back on
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_importing_the_publishers_builds_no_worker_app() -> None:
    out = _run(IMPORTS)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]


def test_the_worker_app_is_built_on_first_use_and_says_what_is_missing() -> None:
    out = _run(FIRST_USE)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]
