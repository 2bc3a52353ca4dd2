#!/usr/bin/env bash
# CI for memworker-crewai: its own virtualenv (crewai's pins exclude memworker's, README.md),
# a real memworker (`memworker up`: embedded Postgres and Redis, the API, a worker) started
# with the `memworker` of the calling environment, two tenants, then the package's tests.
# Run from anywhere with memworker's venv active:  bash integrations/crewai/ci.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 HF_HUB_OFFLINE=1
started=$(date +%s)
memworker_bin="${MEMWORKER_BIN:-$(command -v memworker || true)}"
if [ -z "$memworker_bin" ]; then
  echo "ci(crewai): needs memworker on PATH (activate memworker's venv) or MEMWORKER_BIN" >&2
  exit 2
fi
work="$(mktemp -d)"
up_pid=""
cleanup() {
  if [ -n "$up_pid" ] && kill -0 "$up_pid" 2>/dev/null; then
    kill -TERM "$up_pid" 2>/dev/null || true
    wait "$up_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q -c "$here/constraints.txt" -e "$here[test]"
installed=$(date +%s)

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port)
"$memworker_bin" --data-dir "$work/memworker" up --workers 1 --api-workers 1 --port "$port" \
  --flower-port "$(free_port)" >"$work/up.log" 2>&1 &
up_pid=$!
url="http://127.0.0.1:$port"
for _ in $(seq 1 180); do
  if python3 -c "import urllib.request, sys; urllib.request.urlopen(sys.argv[1] + '/healthz', timeout=2)" "$url" 2>/dev/null; then
    break
  fi
  if ! kill -0 "$up_pid" 2>/dev/null; then
    echo "ci(crewai): memworker up exited; its log:" >&2
    cat "$work/up.log" >&2
    exit 1
  fi
  sleep 1
done
keys=""
for tenant in crewai-a crewai-b; do
  key=$("$memworker_bin" --data-dir "$work/memworker" tenant create --json "$tenant" \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["api_key"])')
  keys="$keys${keys:+,}$key"
done
serving=$(date +%s)

rc=0
(cd "$here" && MEMWORKER_URL="$url" MEMWORKER_TEST_KEYS="$keys" "$work/venv/bin/python" -m pytest -p no:cacheprovider) || rc=$?
if [ "$rc" -eq 5 ]; then echo "ci(crewai): pytest collected no tests" >&2; fi
now=$(date +%s)
echo "ci(crewai): done in $((now - started))s (install $((installed - started))s, memworker up $((serving - installed))s, pytest $((now - serving))s, exit $rc)"
exit "$rc"
