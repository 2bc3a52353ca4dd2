#!/usr/bin/env bash
# Creates the login role the API, workers, beat and Flower connect as (memworker_app), with
# its password from MEMWORKER_APP_PASSWORD.
#
# The postgres image runs this once, at the first start of an EMPTY data volume
# (/docker-entrypoint-initdb.d); it never runs again on an existing volume. The migration
# (sql/0001_init.sql) then finds the role and only GRANTs to it: its DO block creates
# memworker_app only when the role is missing.
#
# The attributes match the migration's: the app role owns nothing and cannot bypass RLS.
# To change the password later (the volume exists, so this file will not run again): in
# `docker compose exec postgres psql -U memworker -d memworker` run `\password memworker_app`,
# then update MEMWORKER_APP_PASSWORD in .env and `docker compose up -d` (ops/runbook.md).
#
# No `set -u` or `exit 0`: the entrypoint sources this file when it is not executable, and
# either would leak into the entrypoint's own shell. `:?` alone fails the init loudly.
set -e

: "${MEMWORKER_APP_PASSWORD:?MEMWORKER_APP_PASSWORD must be set for the postgres service}"

# The password is passed as a psql variable and quoted by psql (:'app_password'), never
# spliced into SQL by the shell; the quoted heredoc keeps the shell away from the SQL.
psql -v ON_ERROR_STOP=1 --no-psqlrc \
     --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
     --set=app_password="$MEMWORKER_APP_PASSWORD" <<'SQL'
CREATE ROLE memworker_app LOGIN PASSWORD :'app_password'
  NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS;
SQL
