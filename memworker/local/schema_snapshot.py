"""The schema the migrations produce, as text to review and compare: `pg_dump --schema-only
--no-owner` of a freshly migrated database, normalised (no per-run restrict key, no server
minor version, no owner names) so that the same migrations give the same bytes.

sql/schema.sql holds it; tests/integration/test_migrations.py migrates a fresh database and
compares. After adding a migration, regenerate it (an embedded Postgres in a temp dir):

    python -m memworker.local.schema_snapshot > sql/schema.sql

The migration runner skips schema.sql (migrate.SNAPSHOT): it only applies NNNN_name.sql."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

from memworker.local import embedded
from memworker.storage import migrate

REGENERATE = "python -m memworker.local.schema_snapshot > sql/schema.sql"
_DROP = re.compile(r"^(\\restrict |\\unrestrict |-- Dumped (from|by) )")


def normalise(dump: str, server_major: int) -> str:
    """pg_dump text without what differs between runs of the same migrations."""
    lines = [line.rstrip() for line in dump.splitlines() if not _DROP.match(line)]
    text = "\n".join(lines)
    text = re.sub(r"\n{3,}", "\n\n", text).strip("\n")
    header = (
        f"-- The catalog sql/NNNN_*.sql produce on PostgreSQL {server_major}: generated, do not edit.\n"
        f"-- Regenerate after adding a migration: {REGENERATE}\n"
        "-- (not a migration: the runner skips this file)\n"
    )
    return header + "\n" + text + "\n"


def snapshot(owner_url: str, pg_dump: str | Path = "pg_dump") -> str:
    """The normalised schema of the database at owner_url."""
    with psycopg.connect(owner_url, autocommit=True) as conn:
        row = conn.execute("SELECT current_setting('server_version_num')::int / 10000").fetchone()
    assert row is not None
    out = subprocess.run(
        [str(pg_dump), "--schema-only", "--no-owner", "--dbname", owner_url],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return normalise(out, int(row[0]))


def main() -> int:
    """Print the snapshot of a fresh database migrated on an embedded Postgres."""
    base = Path(tempfile.mkdtemp(prefix="mwschema-"))
    child, server_url = embedded.start_postgres(base)
    try:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute("CREATE DATABASE memworker_schema")
        url = urlunsplit(urlsplit(server_url)._replace(path="/memworker_schema"))
        migrate.migrate(url)
        sys.stdout.write(snapshot(url, embedded.pg_tool("pg_dump")))
    finally:
        child.stop()
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
