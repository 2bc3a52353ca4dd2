"""The schema is ready to be distributed by tenant (docs/scaling.md): every tenant table has
tenant_id in its primary key, in every unique constraint and index, and in every foreign key
to another tenant table. The others are the reference tables, named here."""

from __future__ import annotations

from typing import Any

import psycopg

# Replicated to every node under Citus: small, and read before a tenant is known.
REFERENCE_TABLES = {"tenants", "api_keys", "schema_migrations"}


def _catalog(owner_url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(owner_url) as conn:
        return conn.execute(sql).fetchall()


def test_every_tenant_table_keys_on_tenant_id(stack: dict[str, Any]) -> None:
    tables = {
        name: has_tenant
        for name, has_tenant in _catalog(
            stack["owner_url"],
            "SELECT c.relname, EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant_id') "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'memworker' AND c.relkind IN ('r', 'p')",
        )
    }
    assert set(tables) >= REFERENCE_TABLES
    tenant_tables = {t for t in tables if t not in REFERENCE_TABLES}
    assert tenant_tables and all(tables[t] for t in tenant_tables), "a table without tenant_id is not a reference table"
    unique = _catalog(
        stack["owner_url"],
        "SELECT c.relname, i.relname, i2.indisprimary, "
        "       ARRAY(SELECT a.attname FROM unnest(i2.indkey) k JOIN pg_attribute a "
        "             ON a.attrelid = c.oid AND a.attnum = k)::text[] "
        "FROM pg_index i2 JOIN pg_class c ON c.oid = i2.indrelid JOIN pg_class i ON i.oid = i2.indexrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'memworker' AND i2.indisunique",
    )
    with_pk = {table for table, _, primary, _ in unique if primary}
    assert tenant_tables <= with_pk
    bad = [(t, idx, cols) for t, idx, _, cols in unique if t in tenant_tables and "tenant_id" not in cols]
    assert bad == [], bad
    foreign = _catalog(
        stack["owner_url"],
        "SELECT c.relname, f.relname, con.conname, "
        "       ARRAY(SELECT a.attname FROM unnest(con.conkey) k JOIN pg_attribute a "
        "             ON a.attrelid = c.oid AND a.attnum = k)::text[] "
        "FROM pg_constraint con JOIN pg_class c ON c.oid = con.conrelid JOIN pg_class f ON f.oid = con.confrelid "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'memworker' AND con.contype = 'f'",
    )
    bad_fks = [
        (t, name, cols)
        for t, target, name, cols in foreign
        if t in tenant_tables and target in tenant_tables and "tenant_id" not in cols
    ]
    assert bad_fks == [], bad_fks
