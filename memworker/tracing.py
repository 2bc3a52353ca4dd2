"""Optional OpenTelemetry tracing (docs/tracing.md): off by default, and then free.

On when MEMWORKER_OTEL_ENDPOINT is set, or when the standard OTEL_EXPORTER_OTLP_ENDPOINT /
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT are; OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none
turn it off whatever else says. The OTEL_* variables belong to the OpenTelemetry SDK, which
reads them itself (OTEL_SERVICE_NAME, OTEL_BSP_*, OTEL_EXPORTER_OTLP_HEADERS, ...); this module
reads only the few that decide whether tracing is on at all, as metrics.py reads
PROMETHEUS_MULTIPROC_DIR.

Each process calls setup() once, before it opens its connection pool: the API in create_app,
a Celery worker in each pool child (tasks/celery_app.py). When tracing is off nothing of
opentelemetry is imported (the packages are the optional extra memworker[otel]), and span()
returns one shared do-nothing context manager."""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from memworker import errors
from memworker.settings import Settings

EXTRA = "memworker[otel]"
_MODULES = (  # what setup() imports, all from the extra
    "opentelemetry.sdk.trace",
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.instrumentation.celery",
    "opentelemetry.instrumentation.psycopg",
    "opentelemetry.instrumentation.fastapi",
)
TRACES_PATH = "/v1/traces"
# Spans of these paths are dropped: probes and scrapes every few seconds would bury the traffic.
# OTEL_PYTHON_FASTAPI_EXCLUDED_URLS, when set, replaces this list (the instrumentation reads it).
EXCLUDED_URLS = "/healthz,/metrics"
_NO_SPAN: AbstractContextManager[None] = nullcontext()
_lock = threading.Lock()
# Set once per interpreter. A forked child inherits them, and the SDK restarts its export
# thread after a fork itself (os.register_at_fork), so the child needs no set-up of its own.
_tracer: Any = None  # the memworker Tracer once setup() turned tracing on
_provider: Any = None


def endpoint(settings: Settings, environ: Mapping[str, str]) -> str | None:
    """The OTLP/HTTP traces URL spans go to, or None when tracing is off."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return None
    if settings.otel_endpoint:
        # a collector's base URL (http://host:4318) or its full traces URL: both work
        base = settings.otel_endpoint.rstrip("/")
        return base if base.endswith(TRACES_PATH) else base + TRACES_PATH
    if environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]  # the spec: used as given
    if environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        return environ["OTEL_EXPORTER_OTLP_ENDPOINT"].rstrip("/") + TRACES_PATH
    return None


def enabled() -> bool:
    """Whether this process traces (setup() turned it on here)."""
    return _tracer is not None


def span(name: str, **attributes: str | int | float | bool) -> AbstractContextManager[Any]:
    """A span around a step (`with tracing.span("ingest.embed", texts=n):`), child of the
    current one. When tracing is off, one shared no-op: no import, nothing but this call."""
    if _tracer is None:
        return _NO_SPAN
    started: AbstractContextManager[Any] = _tracer.start_as_current_span(
        name, attributes={"memworker." + k: v for k, v in attributes.items()}
    )
    return started


def check(settings: Settings, environ: Mapping[str, str] = os.environ) -> str | None:
    """The traces URL when tracing is on, None when off. Raises ConfigError when it is asked
    for and cannot work: the extra is not installed, or a transport it does not ship. A
    Celery worker calls this as it loads (tasks/celery_app.py): a signal handler's error
    would only be logged, and the worker would run untraced."""
    url = endpoint(settings, environ)
    if url is None:
        return None
    for name in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        protocol = environ.get(name, "").strip()
        if protocol and protocol != "http/protobuf":
            raise errors.ConfigError(f"{name}={protocol}: memworker exports OTLP over HTTP (http/protobuf) only")
    try:
        missing = [m for m in _MODULES if importlib.util.find_spec(m) is None]
    except ModuleNotFoundError as exc:  # a parent package itself is missing
        missing = [str(exc)]
    if missing:
        raise errors.ConfigError(
            f"tracing is on (spans to {url}) but the OpenTelemetry packages are missing ({', '.join(missing)}): "
            f"pip install '{EXTRA}', or unset MEMWORKER_OTEL_ENDPOINT / OTEL_EXPORTER_OTLP_*ENDPOINT"
        )
    return url


def setup(settings: Settings, component: str, *, app: Any = None, environ: Mapping[str, str] = os.environ) -> bool:
    """Turn tracing on in this process when the settings and OTEL_* say so; False when off.

    component names the process ("api", "worker"): service.name memworker-<component> unless
    OTEL_SERVICE_NAME (or OTEL_RESOURCE_ATTRIBUTES) names one. Instruments psycopg (every
    connection made after this, the pool's included) and Celery (the publisher injects the
    trace context into each task message's headers; the worker's run span continues it), and
    app, a FastAPI app, when given. Idempotent per process: a second app is instrumented
    with the same provider. Raises ConfigError when tracing is asked for and the extra is
    not installed, or asks for a transport the extra does not ship."""
    global _tracer, _provider
    url = check(settings, environ)
    if url is None:
        return False
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    with _lock:
        if _provider is None:
            resource = Resource.create({"service.namespace": "memworker", "memworker.component": component})
            if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
                resource = resource.merge(Resource({SERVICE_NAME: f"memworker-{component}"}))
            # batched in a background thread: a request never waits for the collector
            provider = TracerProvider(resource=resource)
            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=url)))
            trace.set_tracer_provider(provider)  # the global one, for any other instrumentation
            _provider = provider
            _tracer = provider.get_tracer("memworker")
            # Query text only (it is ours, with placeholders), never the parameters: those
            # are tenants' content. No sqlcommenter: it would make every statement text unique.
            PsycopgInstrumentor().instrument(tracer_provider=provider)
            CeleryInstrumentor().instrument(tracer_provider=provider)  # type: ignore[no-untyped-call]
    if app is not None:
        _instrument_app(app, _provider)
    return True


def _instrument_app(app: Any, provider: Any) -> None:
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
    from opentelemetry.instrumentation.propagators import TraceResponsePropagator, set_global_response_propagator

    # Every answer carries `traceresponse: 00-<trace id>-<span id>-01`: a client sending it
    # back as `traceparent` on a later request (a recall) puts that request in the same trace.
    set_global_response_propagator(TraceResponsePropagator())  # type: ignore[no-untyped-call]
    FastAPIInstrumentor.instrument_app(
        app,
        tracer_provider=provider,
        excluded_urls=None if os.environ.get("OTEL_PYTHON_FASTAPI_EXCLUDED_URLS") else EXCLUDED_URLS,
        exclude_spans=["receive", "send"],  # one span per ASGI message is noise, not insight
        server_request_hook=_without_query,
    )


def _without_query(span: Any, scope: dict[str, Any]) -> None:
    """Keep query strings out of the server span: they carry tenants' content (a metadata
    filter, a console search). The route template and the path stay."""
    if span is None or not span.is_recording() or not scope.get("query_string"):
        return
    attributes = getattr(span, "attributes", None) or {}
    if "http.url" in attributes:
        span.set_attribute("http.url", str(attributes["http.url"]).split("?", 1)[0])
    if "url.query" in attributes:
        span.set_attribute("url.query", "[redacted]")


def shutdown() -> None:
    """Export what is buffered and stop (a Celery pool child about to exit)."""
    if enabled():
        _provider.shutdown()
