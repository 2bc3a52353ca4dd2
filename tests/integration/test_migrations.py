"""The migration runner and the database's own guarantees (RLS, roles)."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memworker import errors
from memworker.local import embedded, schema_snapshot
from memworker.storage import db, migrate
from tests.conftest import _with_db, drop_database, recreate_database

TENANT_TABLES = [
    "api_keys",
    "agents",
    "episodes",
    "memories",
    "memory_terms",
    "memory_connections",
    "consolidation_runs",
    "memory_events",
    "tenants",
]


def test_applied_files_are_recorded_with_checksums(stack: dict[str, Any]) -> None:
    rows = migrate.status(stack["owner_url"])
    assert rows and all(state == "applied" for _, state in rows)
    assert migrate.migrate(stack["owner_url"]) == []  # nothing left to do


def test_an_edited_applied_file_is_refused(stack: dict[str, Any], tmp_path: Path) -> None:
    sql_dir = tmp_path / "sql"
    shutil.copytree(migrate.SQL_DIR, sql_dir)
    first = sorted(sql_dir.glob("*.sql"))[0]
    first.write_text(first.read_text() + "\n-- edited\n")
    with pytest.raises(errors.MigrationError, match="edited"):
        migrate.migrate(stack["owner_url"], sql_dir)
    assert dict(migrate.status(stack["owner_url"], sql_dir))[first.name] == "EDITED"


def test_a_failing_file_rolls_back_whole(stack: dict[str, Any], tmp_path: Path) -> None:
    sql_dir = tmp_path / "sql"
    shutil.copytree(migrate.SQL_DIR, sql_dir)
    (sql_dir / "9998_half.sql").write_text("CREATE TABLE memworker.half_done (id int);\nSELECT no_such_function();\n")
    with pytest.raises(errors.MigrationError, match="9998_half.sql"):
        migrate.migrate(stack["owner_url"], sql_dir)
    with psycopg.connect(stack["owner_url"]) as conn:
        assert conn.execute("SELECT to_regclass('memworker.half_done')").fetchone() == (None,)
    assert dict(migrate.status(stack["owner_url"], sql_dir))["9998_half.sql"] == "pending"


def test_concurrent_migrators_apply_each_file_once(stack: dict[str, Any], tmp_path: Path) -> None:
    sql_dir = tmp_path / "sql"
    shutil.copytree(migrate.SQL_DIR, sql_dir)
    (sql_dir / "9999_counter.sql").write_text(
        "CREATE TABLE memworker.counter (n int);\nINSERT INTO memworker.counter VALUES (1);\n"
    )
    results: list[list[str]] = []
    failures: list[BaseException] = []

    def run() -> None:
        try:
            results.append(migrate.migrate(stack["owner_url"], sql_dir))
        except BaseException as exc:  # collected and asserted below
            failures.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
    assert sorted(len(r) for r in results) == [0, 0, 0, 1]
    with psycopg.connect(stack["owner_url"]) as conn:
        assert conn.execute("SELECT count(*) FROM memworker.counter").fetchone() == (1,)
        conn.execute("DROP TABLE memworker.counter")
        conn.execute("DELETE FROM memworker.schema_migrations WHERE filename = '9999_counter.sql'")


def test_every_tenant_table_has_forced_row_level_security(stack: dict[str, Any]) -> None:
    with psycopg.connect(stack["owner_url"]) as conn:
        rows = dict(
            conn.execute(
                "SELECT c.relname, (c.relrowsecurity AND c.relforcerowsecurity) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'memworker' AND c.relkind = 'r'"
            ).fetchall()
        )
    for table in TENANT_TABLES:
        assert rows[table] is True, table


def test_the_app_role_owns_nothing_and_cannot_bypass_rls(stack: dict[str, Any]) -> None:
    with psycopg.connect(stack["owner_url"]) as conn:
        role = conn.execute("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = 'memworker_app'").fetchone()
        owned = conn.execute(
            "SELECT count(*) FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner WHERE r.rolname = 'memworker_app'"
        ).fetchone()
    assert role == (False, False)
    assert owned == (0,)


def test_with_no_tenant_set_the_app_role_sees_nothing(stack: dict[str, Any], tenants: dict[str, Any]) -> None:
    with psycopg.connect(stack["app_url"]) as conn:
        assert conn.execute("SELECT count(*) FROM memworker.api_keys").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM memworker.tenants").fetchone() == (0,)
        db.bind_tenant(conn, tenants["alice"]["id"])
        assert conn.execute("SELECT count(*) FROM memworker.api_keys").fetchone() == (1,)


def test_a_fresh_database_migrates_to_exactly_sql_schema_sql(services: dict[str, str]) -> None:
    """sql/schema.sql is the reviewed picture of the schema: tables, columns, defaults,
    indexes, constraints, policies, functions and grants the migrations produce."""
    name = "t_schema_snapshot"
    recreate_database(services, name)
    try:
        url = _with_db(services["pg"], name)
        migrate.migrate(url)
        got = schema_snapshot.snapshot(url, embedded.pg_tool("pg_dump"))
    finally:
        drop_database(services, name)
    expected = (migrate.SQL_DIR / migrate.SNAPSHOT).read_text()
    assert got == expected, (
        "the migrated schema differs from sql/schema.sql: if a migration changed it on purpose, "
        f"regenerate it with `{schema_snapshot.REGENERATE}` and review the diff "
        "(generated with the embedded Postgres; another server version prints differently)"
    )


def test_the_runner_applies_numbered_files_only(tmp_path: Path) -> None:
    (tmp_path / "0001_a.sql").write_text("SELECT 1;\n")
    (tmp_path / migrate.SNAPSHOT).write_text("CREATE TABLE never_applied (id int);\n")
    assert [m.filename for m in migrate.discover(tmp_path)] == ["0001_a.sql"]
    (tmp_path / "extra.sql").write_text("SELECT 1;\n")
    with pytest.raises(errors.MigrationError, match="NNNN_snake_case"):
        migrate.discover(tmp_path)
