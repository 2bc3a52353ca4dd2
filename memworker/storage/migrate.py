"""Applies sql/NNNN_*.sql in order, one transaction per file, recording each with its sha256.

Safe when several processes start at once: they queue on one advisory lock, and the
later ones find the work done. An applied file whose checksum changed stops everything."""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg.rows import dict_row

from memworker import errors
from memworker.storage.db import Conn

logger = logging.getLogger(__name__)

SQL_DIR = Path(__file__).resolve().parent / "migrations"  # a link to the repo's sql/, packaged as data
_LOCK_KEY = 0x6D656D776F726B  # "memwork": the advisory lock all migrators share
_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
SNAPSHOT = "schema.sql"  # sql/schema.sql: what the migrations produce (local/schema_snapshot.py), never applied

_CREATE_LEDGER = """
CREATE SCHEMA IF NOT EXISTS memworker;
CREATE TABLE IF NOT EXISTS memworker.schema_migrations (
  filename    text PRIMARY KEY,
  sha256      text NOT NULL,
  applied_at  timestamptz NOT NULL DEFAULT now()
)
"""


@dataclass(frozen=True)
class Migration:
    filename: str
    sql: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def discover(sql_dir: Path = SQL_DIR) -> list[Migration]:
    """The migration files, in order (schema.sql is not one). Raises MigrationError on a misnamed file."""
    found = []
    for path in sorted(sql_dir.glob("*.sql")):
        if path.name == SNAPSHOT:
            continue
        if not _NAME.match(path.name):
            raise errors.MigrationError(f"{path}: migration files are named NNNN_snake_case.sql")
        found.append(Migration(path.name, path.read_text()))
    return found


def status(owner_url: str, sql_dir: Path = SQL_DIR) -> list[tuple[str, str]]:
    """(filename, 'applied' | 'pending' | 'EDITED') for every migration file."""
    with psycopg.connect(owner_url, autocommit=True, row_factory=dict_row) as conn:
        applied = _applied(conn)
    rows = []
    for m in discover(sql_dir):
        if m.filename not in applied:
            rows.append((m.filename, "pending"))
        else:
            rows.append((m.filename, "applied" if applied[m.filename] == m.sha256 else "EDITED"))
    return rows


def migrate(owner_url: str, sql_dir: Path = SQL_DIR) -> list[str]:
    """Apply pending migrations; returns the filenames applied by this call.

    Raises MigrationError if an applied file was edited or a file fails (that file is
    rolled back whole; earlier ones stay applied)."""
    migrations = discover(sql_dir)
    newly: list[str] = []
    with psycopg.connect(owner_url, autocommit=True, row_factory=dict_row) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (_LOCK_KEY,))
        try:
            conn.execute(_CREATE_LEDGER)
            applied = _applied(conn)
            for m in migrations:
                if m.filename in applied:
                    if applied[m.filename] != m.sha256:
                        raise errors.MigrationError(
                            f"{m.filename} was edited after it was applied (checksum changed); "
                            "restore it and put the change in a new migration"
                        )
                    continue
                logger.info("applying migration %s", m.filename)
                try:
                    with conn.transaction():
                        conn.execute(m.sql.encode())
                        conn.execute(
                            "INSERT INTO memworker.schema_migrations (filename, sha256) VALUES (%s, %s)",
                            (m.filename, m.sha256),
                        )
                except psycopg.Error as exc:
                    raise errors.MigrationError(f"{m.filename} failed and was rolled back: {exc}") from exc
                newly.append(m.filename)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_KEY,))
    return newly


def _applied(conn: Conn) -> dict[str, str]:
    exists = conn.execute("SELECT to_regclass('memworker.schema_migrations') AS ledger").fetchone()
    if not exists or exists["ledger"] is None:
        return {}
    rows = conn.execute("SELECT filename, sha256 FROM memworker.schema_migrations")
    return {r["filename"]: r["sha256"] for r in rows}
