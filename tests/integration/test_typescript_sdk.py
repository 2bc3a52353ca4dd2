"""The TypeScript SDK (clients/typescript) against the running stack: its node tests (`npm
test`, node's own runner) call the real API over HTTP with a real Celery worker, as alice,
with bob's key for the isolation test. And the SDK stays the API's: its generated types
(src/schema.ts) are what openapi-typescript makes of the app's OpenAPI document today, and
its operation table names a Client method for every /v1 operation the document has.

Node 20 and npm are required: without them these tests fail (they do not skip). `npm ci`
runs only when node_modules is missing or package-lock.json changed since it last ran."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "clients" / "typescript"
REGENERATE = "cd clients/typescript && npm ci && npm run openapi"
# the generator's options as `npm run openapi` passes them (package.json is their one place)
GENERATOR_OPTIONS = re.findall(
    r"openapi-typescript \S+ (.*?) -o ", json.loads((SDK / "package.json").read_text())["scripts"]["openapi"]
)[0].split()
STAMP = SDK / "node_modules" / ".memworker-lock-sha256"  # the package-lock.json npm ci installed


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not on PATH: the TypeScript SDK's tests need Node.js 20 and npm", pytrace=False)
    return path


def run(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(args),
        cwd=SDK,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def ok(proc: subprocess.CompletedProcess[str], what: str) -> str:
    assert proc.returncode == 0, f"{what} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@cache
def installed() -> None:
    """node_modules as package-lock.json says: `npm ci` when it is missing or the lock changed."""
    node = ok(run(tool("node"), "--version"), "node --version").strip()
    major = int(re.sub(r"^v(\d+).*", r"\1", node, flags=re.DOTALL))
    assert major >= 20, f"the TypeScript SDK needs Node.js 20 or newer, found {node}"
    lock = hashlib.sha256((SDK / "package-lock.json").read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text() == lock:
        return
    ok(run(tool("npm"), "ci", "--no-audit", "--no-fund"), "npm ci")
    STAMP.write_text(lock)


@cache
def openapi() -> dict[str, Any]:
    """The app's OpenAPI document, from the same script `npm run openapi` runs."""
    document: dict[str, Any] = json.loads(ok(run(sys.executable, "scripts/openapi.py"), "scripts/openapi.py"))
    return document


def test_generated_types_match_the_api(tmp_path: Path) -> None:
    installed()
    document = tmp_path / "openapi.json"
    document.write_text(json.dumps(openapi(), indent=2) + "\n")
    fresh = tmp_path / "schema.ts"
    generator = str(SDK / "node_modules" / ".bin" / "openapi-typescript")
    ok(run(generator, str(document), *GENERATOR_OPTIONS, "-o", str(fresh)), "openapi-typescript")
    committed = (SDK / "src" / "schema.ts").read_text()
    assert fresh.read_text() == committed, (
        "clients/typescript/src/schema.ts differs from the API's OpenAPI document; regenerate it "
        f"with `{REGENERATE}`, then add a Client method for any new operation (src/index.ts, OPERATIONS)"
    )


def test_every_operation_has_a_client_method() -> None:
    installed()
    build = run(tool("npm"), "run", "build")
    assert build.returncode == 0, (
        f"the TypeScript SDK does not build:\n{build.stdout}\n{build.stderr}\nOPERATIONS (src/index.ts) must "
        f"name a Client method for every operation of src/schema.ts; regenerate the types with `{REGENERATE}`"
    )
    table = json.loads(ok(run(tool("node"), "scripts/operations.mjs"), "scripts/operations.mjs"))
    operations = {
        f"{method.upper()} {path}"
        for path, ops in openapi()["paths"].items()
        if path.startswith("/v1/")
        for method in ops
    }
    assert len(operations) > 40  # the whole API, not an empty document
    missing = sorted(operations - set(table["operations"]))
    assert not missing, (
        "operations of the API without a method in the TypeScript SDK (clients/typescript/src/index.ts, "
        f"OPERATIONS): {missing}; regenerate the types with `{REGENERATE}` and add the methods"
    )
    gone = sorted(set(table["operations"]) - operations)
    assert not gone, f"OPERATIONS names operations the API no longer has: {gone} (`{REGENERATE}`)"
    absent = sorted({m for m in table["operations"].values()} - set(table["methods"]))
    assert not absent, f"OPERATIONS names Client methods that do not exist: {absent}"
    bodies = method_bodies((SDK / "src" / "index.ts").read_text())
    astray = sorted(f"{m} does not call {op}" for op, m in table["operations"].items() if f'"{op}"' not in bodies[m])
    assert not astray, f"OPERATIONS pairs methods with operations they do not call: {astray}"


def method_bodies(source: str) -> dict[str, str]:
    """Each Client method's source text (prettier's layout: a method starts two spaces in),
    from its name to the next method's."""
    class_body = source[source.index("export class Client") : source.index("type MethodName")]
    starts = list(re.finditer(r"^  (?:private |async |get )*\*?(\w+)(?:<[^>]*>)?\(", class_body, re.MULTILINE))
    ends = [m.start() for m in starts[1:]] + [len(class_body)]
    return {m.group(1): class_body[m.start() : end] for m, end in zip(starts, ends, strict=True)}


def test_node_tests_against_the_running_stack(api: str, tenants: dict[str, Any], worker: Any) -> None:
    installed()
    env = {
        "MEMWORKER_URL": api,
        "MEMWORKER_API_KEY": tenants["alice"]["key"],
        "MEMWORKER_OTHER_API_KEY": tenants["bob"]["key"],
    }
    proc = run(tool("npm"), "test", env=env, timeout=240)
    output = f"{proc.stdout}\n{proc.stderr}"
    assert proc.returncode == 0, f"npm test exited {proc.returncode}:\n{output}"
    # node's summary (TAP, or spec on a terminal): every test ran and passed, none skipped (the other tenant's key was given)
    assert re.search(r"^[#ℹ] fail 0$", proc.stdout, re.MULTILINE), output
    assert re.search(r"^[#ℹ] skipped 0$", proc.stdout, re.MULTILINE), output
    passed = re.search(r"^[#ℹ] pass (\d+)$", proc.stdout, re.MULTILINE)
    assert passed and int(passed.group(1)) >= 10, output
