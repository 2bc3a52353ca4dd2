"""The Celery app: JSON only, four queues, late acks, one message per worker at a time.

Workers: celery -A tasks.celery_app worker -Q ingest,consolidate,maintenance
Webhook senders (their own processes: a hanging receiver never holds an ingest worker):
  celery -A tasks.celery_app worker -Q webhooks -P threads -c 8
Beat (exactly one): celery -A tasks.celery_app beat"""

from __future__ import annotations

import functools
import logging
import os
import time
from typing import Any, TypedDict, cast

from celery import Celery, signals
from celery.schedules import crontab
from kombu import Queue

from memworker import metrics, runtime, tracing
from memworker.settings import Settings

logger = logging.getLogger(__name__)

INGEST, CONSOLIDATE, MAINTENANCE = "ingest", "consolidate", "maintenance"
WEBHOOKS = "webhooks"  # deliveries only: tenants' receivers may hang for the timeout
QUEUES = (INGEST, CONSOLIDATE, MAINTENANCE, WEBHOOKS)
SLEEP_SWEEP_EVERY_S = 60.0  # the consolidation sweep: cheap, and a no-op for disabled agents
RETENTION_EVERY_S = 3600.0  # the retention tick: one sweep per agent per hour
WEBHOOK_SWEEP_EVERY_S = 30.0  # re-send webhook deliveries whose message was lost
RUMINATION_AT = crontab(hour=0, minute=30)  # daily, over the day before (UTC)
# A pool child loads the embedding model before it reports up (_init_process); Celery's 4 s
# default kills a slower one and forks another, forever, so a worker whose child died
# (OOM killer, SIGKILL) never worked again. Loading takes ~15 s on a busy 2-core box.
CHILD_INIT_TIMEOUT_S = 120.0
# Message priorities (fair ingest, docs/episodes.md): kombu's Redis transport keeps one list per
# queue and step and pops them in this order, so 0 is served first (tasks/publish.py
# Publisher.queue_depths reads the same lists). Pinned here rather than left to kombu's default.
PRIORITY_STEPS = (0, 3, 6, 9)

# Which queue each task is sent to (a worker consumes the queues named by its -Q).
TASK_ROUTES = {
    "memworker.ingest": {"queue": INGEST},
    "memworker.reconcile": {"queue": MAINTENANCE},
    "memworker.consolidation_sweep": {"queue": MAINTENANCE},
    "memworker.consolidate": {"queue": CONSOLIDATE},
    "memworker.retention_tick": {"queue": MAINTENANCE},
    "memworker.retention_sweep": {"queue": MAINTENANCE},
    "memworker.deliver_webhook": {"queue": WEBHOOKS},
    "memworker.webhook_sweep": {"queue": MAINTENANCE},
    "memworker.ruminate_tick": {"queue": MAINTENANCE},
    "memworker.ruminate": {"queue": MAINTENANCE},
    "memworker.drain_access": {"queue": MAINTENANCE},
}


def make_celery(settings: Settings) -> Celery:
    app = Celery(
        "memworker",
        broker=settings.redis_url,
        include=[
            "tasks.ingest_tasks",
            "tasks.maintenance_tasks",
            "tasks.consolidate_tasks",
            "tasks.retention_tasks",
            "tasks.session_tasks",
            "tasks.access_tasks",
        ],
    )
    app.conf.update(
        task_serializer="json",
        accept_content=["json"],
        result_serializer="json",
        task_ignore_result=True,  # Postgres is the record of every attempt, not a result backend
        task_acks_late=True,  # ack after the work: a killed worker's message is delivered again
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        worker_proc_alive_timeout=CHILD_INIT_TIMEOUT_S,
        # Unacked messages come back after this long; it must exceed the longest task, and
        # the reconciler's lease covers anything Redis itself loses.
        broker_transport_options={
            "visibility_timeout": settings.visibility_timeout_s,
            "priority_steps": list(PRIORITY_STEPS),
        },
        task_queues=[Queue(q) for q in QUEUES],
        task_default_queue=INGEST,
        task_routes=TASK_ROUTES,
        worker_send_task_events=True,
        task_send_sent_event=True,  # for Flower
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        beat_schedule=beat_schedule(settings),
    )
    app.conf.memworker_settings = settings
    return app


class Sending(TypedDict):
    """How beat sends a tick: to which queue, and after how many seconds it is dropped unread."""

    queue: str
    expires: float


class BeatEntry(TypedDict):
    """One tick of beat's schedule: the task, every how many seconds (or when), how it is sent."""

    task: str
    schedule: float | crontab
    options: Sending


def beat_schedule(settings: Settings) -> dict[str, BeatEntry]:
    """What beat sends and how often. Each message expires (most after one period): a tick no
    worker reached in time is dropped, not piled up behind the next one."""
    schedule: dict[str, BeatEntry] = {
        "reconcile": {
            "task": "memworker.reconcile",
            "schedule": settings.reconcile_every_s,
            "options": {"queue": MAINTENANCE, "expires": settings.reconcile_every_s},
        },
        "consolidation-sweep": {
            "task": "memworker.consolidation_sweep",
            "schedule": SLEEP_SWEEP_EVERY_S,
            "options": {"queue": MAINTENANCE, "expires": SLEEP_SWEEP_EVERY_S},
        },
        "retention-tick": {
            "task": "memworker.retention_tick",
            "schedule": RETENTION_EVERY_S,
            "options": {"queue": MAINTENANCE, "expires": RETENTION_EVERY_S},
        },
        "webhook-sweep": {
            "task": "memworker.webhook_sweep",
            "schedule": WEBHOOK_SWEEP_EVERY_S,
            "options": {"queue": MAINTENANCE, "expires": WEBHOOK_SWEEP_EVERY_S},
        },
        "rumination": {
            "task": "memworker.ruminate_tick",
            "schedule": RUMINATION_AT,
            "options": {"queue": MAINTENANCE, "expires": 3600},
        },
        "drain-access": {  # the access bumps recalls queue in Redis (storage/bumps.py)
            "task": "memworker.drain_access",
            "schedule": settings.access_drain_every_s,
            "options": {"queue": MAINTENANCE, "expires": settings.access_drain_every_s},
        },
    }
    return schedule


def settings_of(app: Celery) -> Settings:
    return cast(Settings, app.conf.memworker_settings)  # set by make_celery


@functools.cache
def worker_app() -> Celery:
    """The workers' and beat's app, from MEMWORKER_* (or a running `memworker up`), built on
    first use: importing this module builds nothing, so a process that only publishes (the
    API, the SDK, the CLI) makes just its own Publisher's app. A worker without a broker to
    reach, or asked to trace and unable to (the extra missing, a transport it lacks), stops
    here as it loads: the set-up in its pool children runs in a signal handler, whose errors
    Celery only logs."""
    app = make_celery(runtime.resolve(Settings.from_env(os.environ)))
    tracing.check(settings_of(app))
    return app


def __getattr__(name: str) -> Celery:
    # `celery -A tasks.celery_app` and the task modules (`from tasks.celery_app import app`)
    # read `app`: that first read builds the worker's app.
    if name == "app":
        return worker_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@signals.worker_process_init.connect
def _init_process(**_: object) -> None:
    # Tracing first (docs/tracing.md): psycopg's instrumentation must see the pool's connections.
    tracing.setup(settings_of(worker_app()), "worker")
    # Build the pool and load the model once per child, before its first task.
    runtime.for_process(settings_of(worker_app()))


@signals.worker_init.connect
def _init_worker(sender: Any = None, **_: object) -> None:
    # A pool that does not fork (the webhook senders' threads, solo) sends no
    # worker_process_init: its tasks run here. A prefork parent runs none, so it does not trace.
    pool = getattr(sender, "pool_cls", "prefork")
    if "prefork" not in (pool if isinstance(pool, str) else pool.__module__):
        tracing.setup(settings_of(worker_app()), "worker")


@signals.worker_process_shutdown.connect
def _end_process(**_: object) -> None:
    tracing.shutdown()  # a pool child leaves by os._exit: no atexit flushes its last spans


_started: dict[str, float] = {}


@signals.task_prerun.connect
def _task_started(task_id: str = "", **_: object) -> None:
    _started[task_id] = time.perf_counter()


@signals.task_postrun.connect
def _task_finished(task_id: str = "", task: Any = None, state: str | None = None, **_: object) -> None:
    began = _started.pop(task_id, None)
    if began is not None and task is not None:
        metrics.TASK_SECONDS.labels(task.name, state or "UNKNOWN").observe(time.perf_counter() - began)


@signals.setup_logging.connect
def _setup_logging(loglevel: int | str | None = None, **_: object) -> None:
    # memworker's own loggers follow MEMWORKER_LOG_LEVEL; Celery's (`celery.*`: beat's "Sending
    # due task" at every tick, a worker's task lines) follow the command's --loglevel.
    level = settings_of(worker_app()).log_level
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(processName)s %(name)s: %(message)s")
    if loglevel:
        logging.getLogger("celery").setLevel(loglevel)
