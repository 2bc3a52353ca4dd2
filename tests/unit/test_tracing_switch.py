"""Tracing's switch (docs/tracing.md): off by default and then nothing of opentelemetry is
imported; the settings and the standard OTEL_* variables decide; a clear error when tracing
is asked for without the extra. The traces themselves: tests/acceptance/test_tracing.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memworker import errors, tracing
from memworker.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
OFF = Settings()
ON = Settings(otel_endpoint="http://collector:4318")


# Run in a fresh interpreter (this one may have imported opentelemetry for other tests): build
# the API app, load the worker's tasks and run their process hooks as a worker would, and use
# span(), all with tracing off. Every import statement goes through builtins.__import__, even
# of a module already loaded: the wrapper notes each one of opentelemetry made by our modules.
OFF_PATH = """
import builtins, json, sys
ours = []
real_import = builtins.__import__
def noting_import(name, globals=None, locals=None, fromlist=(), level=0):
    importer = (globals or {}).get("__name__", "")
    if name.split(".")[0] == "opentelemetry" and importer.split(".")[0] in ("memworker", "tasks"):
        ours.append(importer)
    return real_import(name, globals, locals, fromlist, level)
builtins.__import__ = noting_import
from memworker import tracing
from memworker.api import app as api_app
from memworker.settings import Settings
import tasks.celery_app as celery_app
import tasks.ingest_tasks
settings = Settings(database_url="postgresql://nobody@127.0.0.1:1/x", redis_url="redis://127.0.0.1:1/0")
api_app.create_app(settings)
celery_app._init_worker(sender=None)
celery_app._end_process()
assert tracing.setup(settings, "worker") is False and not tracing.enabled()
with tracing.span("ingest.embed", texts=3) as span:
    assert span is None
print(json.dumps({"ours": ours, "loaded": sorted(m for m in sys.modules if m.startswith("opentelemetry"))}))
"""


def test_nothing_of_opentelemetry_is_imported_when_tracing_is_off() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "MEMWORKER_"))}
    env |= {
        "MEMWORKER_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/x",
        "MEMWORKER_REDIS_URL": "redis://127.0.0.1:1/0",
    }
    out = subprocess.run(
        [sys.executable, "-c", OFF_PATH], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["ours"] == []  # no module of memworker or tasks imported any of it
    # What is loaded is the API that FastAPI (0.16x: its native telemetry, idle without a
    # provider) and redis-py 8 (its optional metrics) import on their own: no tracing SDK, no
    # exporter, no instrumentation, nor the protobuf and requests those pull in.
    heavy = (
        "opentelemetry.sdk.trace",
        "opentelemetry.exporter",
        "opentelemetry.instrumentation",
        "opentelemetry.proto",
    )
    assert [m for m in got["loaded"] if m.startswith(heavy)] == []


@pytest.mark.parametrize(
    ("settings", "environ", "expected"),
    [
        (OFF, {}, None),
        (ON, {}, "http://collector:4318/v1/traces"),
        (Settings(otel_endpoint="https://c/v1/traces/"), {}, "https://c/v1/traces"),
        (OFF, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"}, "http://c:4318/v1/traces"),
        (OFF, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:9/custom"}, "http://c:9/custom"),
        (ON, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://other:4318"}, "http://collector:4318/v1/traces"),
        (ON, {"OTEL_SDK_DISABLED": "true"}, None),
        (OFF, {"OTEL_SDK_DISABLED": "TRUE", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, None),
        (ON, {"OTEL_SDK_DISABLED": "false"}, "http://collector:4318/v1/traces"),
        (ON, {"OTEL_TRACES_EXPORTER": "none"}, None),
        (OFF, {"OTEL_SERVICE_NAME": "x"}, None),  # naming a service does not turn tracing on
    ],
)
def test_the_settings_and_the_standard_variables_decide(
    settings: Settings, environ: dict[str, str], expected: str | None
) -> None:
    assert tracing.endpoint(settings, environ) == expected


def test_span_is_one_shared_no_op_when_off() -> None:
    assert not tracing.enabled()
    assert tracing.span("a", n=1) is tracing.span("b")


def test_a_missing_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # as if memworker[otel] were not installed
    with pytest.raises(errors.ConfigError, match=r"memworker\[otel\]"):
        tracing.setup(ON, "api", environ={})
    assert not tracing.enabled()


def test_a_worker_that_cannot_trace_does_not_start() -> None:
    """The worker's app checks as it is built: `celery worker` exits instead of running untraced."""
    env = {
        **os.environ,
        "MEMWORKER_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/x",
        "MEMWORKER_REDIS_URL": "redis://127.0.0.1:1/0",
        "MEMWORKER_OTEL_ENDPOINT": "http://127.0.0.1:9",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
    }
    load = "from celery.app.utils import find_app; find_app('tasks.celery_app')"  # as `celery -A` does
    run = subprocess.run([sys.executable, "-c", load], env=env, capture_output=True, text=True)
    assert run.returncode != 0 and "http/protobuf" in run.stderr


def test_an_unsupported_transport_is_refused_before_anything_is_imported() -> None:
    with pytest.raises(errors.ConfigError, match="http/protobuf"):
        tracing.setup(ON, "api", environ={"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    assert not tracing.enabled()


def test_the_endpoint_setting_is_read_and_checked() -> None:
    got = Settings.from_env({"MEMWORKER_OTEL_ENDPOINT": "http://collector:4318"})
    assert got.otel_endpoint == "http://collector:4318"
    assert got.to_env()["MEMWORKER_OTEL_ENDPOINT"] == "http://collector:4318"  # `memworker up`'s children
    with pytest.raises(errors.ConfigError, match="MEMWORKER_OTEL_ENDPOINT"):
        Settings.from_env({"MEMWORKER_OTEL_ENDPOINT": "collector:4317"})
