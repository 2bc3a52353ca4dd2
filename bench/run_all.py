"""The whole benchmark suite in one command: runs each bench in sequence as a subprocess and
writes one combined markdown report, bench/results/report.md (also printed to stdout).

Run:  python bench/run_all.py                       # the full sizes (about an hour)
      python bench/run_all.py --quick               # a small smoke run (minutes)
      python bench/run_all.py --only recall_latency,locomo_recall
      python bench/run_all.py --skip retention --extra "recall_latency=--agents 500"
      python bench/run_all.py --list                # the sections and their arguments

Sections (in this order; the default sizes are the full ones):
  ingest          bench/ingest.py: episodes/s end to end next to the embedder's own ceiling
  recall_latency  bench/recall_latency.py: 1,000 agents x 1,000 memories, 1/16/64 clients
  consolidation   bench/consolidation.py: 1,000 agents x 50 memories, one sweep, 1 vs 2 workers
  retention       bench/retention.py: 1,000 agents x 1,000 memories, first/hourly/daily sweep
  locomo_recall   bench/locomo_recall.py: LoCoMo turn-level recall vs baselines
  episodes_recall bench/episodes_recall.py: LoCoMo through episodes (direct / reflect-only / two
                  layers), ingest vs the embedder
  lifecycle       bench/lifecycle.py: LoCoMo, 60 simulated days of sleep and retention beside a
                  frozen twin (rows kept, R@10 of asked and never-asked questions)
  knowledge_updates bench/knowledge_updates.py: 451 update, look-alike and contradiction cases
                  through the API (stale superseded/reviewed, recall, false alarms, after sleep)
  fleet_memory    bench/fleet_memory.py: 40 agents x 20 subjects x 20 conflicting facts (the
                  size one 2-core machine ingests in about 25 minutes): isolation, per-subject
                  R@5 vs single-subject agents, updates within subjects, recall over 10 agents

Each bench runs in its own process group with MEMWORKER_BENCH_RESULTS pointing at a scratch
folder (bench/_common.write_report honours it; locomo_recall gets --out), so the curated
per-bench files in bench/results/ are left as they are and the combined report holds exactly
what each bench wrote. A bench that fails, times out (--section-timeout) or writes no report
is recorded as such, with the tail of its output, and the suite goes on. Every bench's output
(progress bars included) is copied to stderr and to a log in the scratch folder (--logs to
keep it); the report goes to stdout and to --out."""

from __future__ import annotations

import argparse
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import BENCH, RESULTS, ROOT, git_commit, loadavg, md_table  # noqa: E402

TAIL_LINES = 40  # lines of a failed bench's output quoted in the report


@dataclass(frozen=True)
class Section:
    """One bench of the suite: its script, its arguments at full and at quick size, the report
    file it writes, and how to pull a one-line headline out of that report."""

    name: str
    title: str
    script: str
    full: tuple[str, ...]
    quick: tuple[str, ...]
    result: str
    headline: Callable[[str], str]


@dataclass
class Outcome:
    section: Section
    argv: list[str]
    status: str = "not run"  # ok, failed (exit N), timed out, no report, interrupted
    seconds: float = 0.0
    load_before: str = ""
    load_after: str = ""
    commit: str = ""  # others may commit while a long suite runs: each section records its own
    markdown: str = ""
    tail: list[str] = field(default_factory=list)


# --- headlines: one line per section for the summary table (best effort: "" if not found) ---


def _row(markdown: str, first_cell: str) -> list[str]:
    """The cells of the first table row whose first cell starts with first_cell."""
    for line in markdown.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.lstrip().startswith("|") and cells and cells[0].startswith(first_cell):
            return cells
    return []


def _ingest_headline(md: str) -> str:
    ceiling, end, share = (_row(md, label) for label in ("embedder ceiling", "end to end", "share of the"))
    if not (ceiling and end and share):
        return ""
    return f"{end[1]} episodes/s end to end vs embedder ceiling {ceiling[1]} episodes/s: {share[1]}"


def _recall_headline(md: str) -> str:
    m = re.search(r"Target: .*?= \*\*([\d.,]+) ms\*\*; measured \*\*([\d.,]+) ms\*\*: (\w+)", md)
    parts = [f"1-client uncached server p50 {m.group(2)} ms vs target <= {m.group(1)} ms ({m.group(3)})"] if m else []
    reps = re.search(r"Met in (\d+) of (\d+); median p50 / target (\d+(?:\.\d+)?)", md)
    if reps:
        parts.append(f"target met in {reps.group(1)} of {reps.group(2)} checks (median {reps.group(3)} x)")
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 5 and cells[0].endswith("clients, uncached"):
            parts.append(f"{cells[1]} clients: p50 {cells[5]} ms, {cells[4]} QPS")
    return "; ".join(parts)


def _consolidation_headline(md: str) -> str:
    totals = []
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 8 and cells[0].isdigit():  # the fleet table: workers | passes | total s | ...
            totals.append(f"{cells[0]} worker(s) {cells[2]} s")
    m = re.search(r"Ratio time\(1 worker\) / time\(2 workers\): ([\d.]+)x", md)
    return ", ".join(totals) + (f"; ratio {m.group(1)}x" if m else "")


def _retention_headline(md: str) -> str:
    parts = []
    for label in ("first sweep", "hourly sweep", "daily sweep"):
        row = _row(md, label)
        if len(row) > 3:
            parts.append(f"{label} {row[2]} s ({row[3]} agents/s)")
    return "; ".join(parts)


def _locomo_headline(md: str) -> str:
    row, bm25 = _row(md, "memworker"), _row(md, "BM25")
    if len(row) < 3:
        return ""
    return f"memworker R@5 {row[1]} / R@10 {row[2]}" + (f" (BM25 {bm25[1]} / {bm25[2]})" if len(bm25) > 2 else "")


def _episodes_headline(md: str) -> str:
    rows = {v: _row(md, v) for v in ("direct", "reflect", "episodes")}
    if not all(len(r) > 2 for r in rows.values()):
        return ""
    out = "R@10 " + ", ".join(f"{v} {r[2]}" for v, r in rows.items())
    m = re.search(
        r"^\| conversations \| rows day 0 \|.*\n\|[-|]+\|\n\| all \| ([^|]+)\| ([^|]+)\| ([^|]+)\|(?:[^|]+\|){2}([^|]+)\|",
        md,
        re.M,
    )
    if m:
        out += f"; after the aging: rows {m.group(3).strip()}, R@10 kept {m.group(4).strip()} x"
    return out


def _lifecycle_headline(md: str) -> str:
    found = re.findall(
        r"^\| (live rows day \d+ / day 0|never-asked R@10, live / twin|asked R@10, live / twin) \| ([^|]+)\|", md, re.M
    )
    return "; ".join(f"{k} {v.strip()}" for k, v in found)


def _right_at_ingest(md: str, after: str) -> str:
    """'shape rate, ...' from the first table after the heading `after` whose rows are
    | shape | pairs | right at ingest | ... (the knowledge-update tables)."""
    tail = md.split(after, 1)[1] if after in md else ""
    rates = [
        (shape, row[2])
        for shape in ("swap", "negation", "value", "paraphrase", "near-miss")
        if len(row := _row(tail, shape)) > 2
    ]
    return ", ".join(f"{shape} {rate}" for shape, rate in rates)


def _knowledge_updates_headline(md: str) -> str:
    """Each split's "all" row of the three tables: updates handled, false alarms, reviews."""
    parts = []
    for title, what in (
        ("## Updates", "updates handled"),
        ("## Look-alikes", "false alarms"),
        ("## Contradictions", "reviewed"),
    ):
        tail = md.split(title, 1)[1] if title in md else ""
        for split in ("dev", "test"):
            row = re.search(rf"^\| {split} \| all \| \d+ \| ([\d.]+ %)", tail, re.M)
            if row:
                parts.append(f"{what} ({split}) {row.group(1)}")
    return ", ".join(parts)


def _fleet_headline(md: str) -> str:
    parts = []
    size = re.search(r"^(\d+ agents x \d+ subjects x \d+ facts)", md, re.M)
    if size:
        parts.append(size.group(1))
    iso = re.search(r"^\| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|$", md, re.M)
    if iso:
        parts.append(f"crossed {iso.group(2)}, reviews across subjects {iso.group(4)}, mixed derived {iso.group(6)}")
    r5 = _row(md, "ratio")
    if len(r5) > 1 and r5[1] != "":
        parts.append(f"R@5 fleet / single {r5[1]}")
    rates = _right_at_ingest(md, "## Knowledge updates")
    if rates:
        parts.append(f"right at ingest: {rates}")
    p50 = _row(md, "ratio (p50)")
    if len(p50) > 1:
        parts.append(f"recall p50 across agents / one agent {p50[1]}")
    return "; ".join(parts)


SECTIONS = [
    Section(
        "ingest",
        "Ingest throughput vs the embedder's limit",
        "ingest.py",
        full=(),
        quick=(
            "--episodes",
            "200",
            "--single",
            "40",
            "--paced",
            "5",
            "--agents",
            "5",
            "--overflow",
            "40",
            "--overflow-wait",
            "60",
            "--embed-sample",
            "128",
            "--timeout",
            "300",
        ),
        result="ingest.md",
        headline=_ingest_headline,
    ),
    Section(
        "recall_latency",
        "Recall latency",
        "recall_latency.py",
        full=("--agents", "1000", "--memories", "1000", "--clients", "1,16,64", "--repeats", "3"),
        quick=(
            "--agents",
            "20",
            "--memories",
            "500",
            "--clients",
            "1,16,64",
            "--requests",
            "50",
            "--concurrent-requests",
            "128",
            "--bare",
            "30",
        ),
        result="recall_latency.md",
        headline=_recall_headline,
    ),
    Section(
        "consolidation",
        "Consolidation fleet sweep, 1 vs 2 workers",
        "consolidation.py",
        full=("--agents", "1000", "--workers", "1,2"),
        quick=("--agents", "50", "--single", "10", "--pool", "500", "--workers", "1,2", "--timeout", "600"),
        result="consolidation.md",
        headline=_consolidation_headline,
    ),
    Section(
        "retention",
        "Retention sweep",
        "retention.py",
        full=(),
        quick=("--agents", "30", "--memories", "300"),
        result="retention.md",
        headline=_retention_headline,
    ),
    Section(
        "locomo_recall",
        "LoCoMo recall",
        "locomo_recall.py",
        full=(),
        quick=("--conversations", "1"),
        result="locomo_recall.md",
        headline=_locomo_headline,
    ),
    Section(
        "episodes_recall",
        "Episodes in, recall out: LoCoMo through the main path",
        "episodes_recall.py",
        full=(),
        quick=("--conversations", "1"),
        result="episodes_recall.md",
        headline=_episodes_headline,
    ),
    Section(
        "lifecycle",
        "The lifecycle: 60 simulated days beside a frozen twin",
        "lifecycle.py",
        full=(),
        quick=("--conversations", "1", "--days", "15"),
        result="lifecycle.md",
        headline=_lifecycle_headline,
    ),
    Section(
        "knowledge_updates",
        "Knowledge updates: stale facts superseded, look-alikes kept",
        "knowledge_updates.py",
        full=(),
        quick=("--limit", "20"),
        result="knowledge_updates.md",
        headline=_knowledge_updates_headline,
    ),
    Section(
        "fleet_memory",
        "Fleet memory: subjects, updates within them, recall across agents",
        "fleet_memory.py",
        full=("--agents", "40", "--subjects", "20", "--facts", "20", "--queries", "60", "--consolidation-passes", "12"),
        quick=("--agents", "2", "--subjects", "3", "--facts", "8", "--queries", "10", "--consolidation-passes", "1"),
        result="fleet_memory.md",
        headline=_fleet_headline,
    ),
]
BY_NAME = {s.name: s for s in SECTIONS}


# --- running one bench ---------------------------------------------------------------------------


def log(msg: str) -> None:
    print(f"[run_all {datetime.now().strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def bench_argv(section: Section, quick: bool, extra: Sequence[str], out_dir: Path) -> list[str]:
    argv = [sys.executable, str(BENCH / section.script), *(section.quick if quick else section.full), *extra]
    if section.name == "locomo_recall":  # it has its own --out instead of write_report
        argv += ["--out", str(out_dir / section.result)]
    return argv


def _stop_group(proc: subprocess.Popen[bytes], grace_s: float = 30.0) -> None:
    """SIGTERM to the bench's process group (bench/_common.py turns it into SystemExit, so the
    bench's finally blocks stop the stack it started; `memworker up` stops its children on it
    too), then SIGKILL whatever is left after grace_s. Not SIGINT: a suite started from a
    background shell (`cmd &`, nohup) hands its children SIGINT ignored, and the bench would
    run on until the SIGKILL."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _reap_leftovers(section: Section, proc: subprocess.Popen[bytes]) -> None:
    """A bench that died without stopping its stack would leave `memworker up` and its children
    loading the machine for every later section: end what is left of its process group."""
    try:
        os.killpg(proc.pid, 0)
    except (ProcessLookupError, PermissionError):
        return
    log(f"{section.name}: processes of the bench still running after it ended; stopping them")
    for sig, pause in ((signal.SIGTERM, 30.0), (signal.SIGKILL, 0.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + pause
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.5)


def run_section(section: Section, argv: list[str], out_dir: Path, log_path: Path, timeout_s: float) -> Outcome:
    """Runs one bench, its output copied to stderr and log_path as it comes."""
    outcome = Outcome(section, argv, load_before=loadavg(), commit=git_commit())
    env = {
        **os.environ,
        "MEMWORKER_BENCH_RESULTS": str(out_dir),
        # the editable install may not point at this checkout: the benches import memworker from it
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p),
    }
    started = time.monotonic()
    with open(log_path, "wb") as logf:
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=ROOT,
            env=env,
            start_new_session=True,
        )
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        os.set_blocking(fd, False)
        timed_out = False
        try:
            while True:
                try:
                    chunk: bytes | None = os.read(fd, 65536)
                except BlockingIOError:
                    chunk = None  # nothing to read just now
                if chunk:
                    logf.write(chunk)
                    sys.stderr.buffer.write(chunk)
                    sys.stderr.flush()
                    continue
                # EOF, or the bench has exited (a leftover grandchild may still hold the pipe)
                if chunk == b"" or proc.poll() is not None:
                    break
                if time.monotonic() - started > timeout_s:
                    timed_out = True
                    log(f"{section.name}: no end after {timeout_s:.0f} s; stopping it")
                    _stop_group(proc)
                    break
                time.sleep(0.2)
            proc.wait()
        except KeyboardInterrupt:
            log(f"{section.name}: interrupted; stopping it")
            _stop_group(proc)
            outcome.status = "interrupted"
        finally:
            rest = _drain(fd)
            logf.write(rest)
            sys.stderr.buffer.write(rest)
            sys.stderr.flush()
            _reap_leftovers(section, proc)
    outcome.seconds = time.monotonic() - started
    outcome.load_after = loadavg()
    report = out_dir / section.result
    if report.exists():
        outcome.markdown = report.read_text()
    if outcome.status != "interrupted":
        if timed_out:
            outcome.status = f"timed out after {timeout_s:.0f} s"
        elif proc.returncode != 0:
            outcome.status = f"failed (exit {proc.returncode})"
        elif not outcome.markdown:
            outcome.status = "no report written"
        else:
            outcome.status = "ok"
    if outcome.status != "ok":
        text = log_path.read_bytes().decode("utf-8", "replace").replace("\r", "\n")
        outcome.tail = [ln for ln in text.splitlines() if ln.strip()][-TAIL_LINES:]
    return outcome


def _drain(fd: int) -> bytes:
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except (BlockingIOError, OSError):
            return out
        if not chunk:
            return out
        out += chunk


# --- the report ----------------------------------------------------------------------------------


def machine() -> str:
    mem = "n/a"
    cpu = platform.processor() or platform.machine()
    try:
        meminfo = Path("/proc/meminfo").read_text()
        m = re.search(r"MemTotal:\s+(\d+) kB", meminfo)
        if m:
            mem = f"{int(m.group(1)) / 1024 / 1024:.1f} GiB"
        model = re.search(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text())
        if model:
            cpu = model.group(1).strip()
    except OSError:
        pass
    return (
        f"{os.cpu_count()} CPUs ({cpu}), {mem} memory, {platform.system()} {platform.release()}, "
        f"{platform.python_implementation()} {platform.python_version()}"
    )


def demote(markdown: str, levels: int = 2) -> str:
    """A bench's own headings, pushed under the section heading (outside code fences)."""
    out, fenced = [], False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and re.match(r"#{1,6} ", line):
            line = "#" * levels + line
        out.append(line)
    return "\n".join(out)


def _duration(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    return f"{m} min {s:02d} s" if m else f"{s} s"


def render(
    outcomes: list[Outcome],
    args: argparse.Namespace,
    command: str,
    started_at: datetime,
    total_s: float,
    load_start: str,
    load_end: str,
    commit: str,
) -> str:
    mode = "--quick: smoke sizes, not comparable with a full run" if args.quick else "full: the default sizes"
    lines = [
        "# memworker benchmark report",
        "",
        f"- date: {started_at.strftime('%Y-%m-%d %H:%M UTC')}; total {_duration(total_s)}",
        f"- git commit: {commit} at the start"
        + ("" if all(o.commit == commit for o in outcomes) else " (it changed during the run: see each section)"),
        f"- machine: {machine()}",
        f"- load average (1/5/15 min): {load_start} at the start, {load_end} at the end",
        f"- command: `{command}` ({mode})",
        (
            "- each section ran alone, one after the other, each bench in its own process with its own "
            "embedded stack; the machine may be shared with other work, so compare figures within a "
            "section (same run), not across reports"
        ),
        "",
        "## Summary",
        "",
        md_table(
            ["section", "status", "duration", "load before", "load after", "headline"],
            [
                [
                    f"[{o.section.name}](#{i}-{_anchor(o.section.title)})",
                    o.status,
                    _duration(o.seconds),
                    o.load_before,
                    o.load_after,
                    (o.section.headline(o.markdown) if o.markdown else "") or "-",
                ]
                for i, o in enumerate(outcomes, 1)
            ],
        ),
        "",
    ]
    for i, o in enumerate(outcomes, 1):
        lines += [
            f"## {i}. {o.section.title}",
            "",
            f"- bench: `{' '.join(shlex.quote(a) for a in _display_argv(o.argv))}`",
            (
                f"- status: **{o.status}**; duration {_duration(o.seconds)}; load average before "
                f"{o.load_before}, after {o.load_after}; commit {o.commit}"
            ),
            "",
        ]
        if o.tail:
            lines += [f"Last {len(o.tail)} lines of its output:", "", "```", *o.tail, "```", ""]
        if o.markdown:
            lines += [demote(o.markdown.strip()), ""]
        elif o.status == "ok":
            lines += ["(no report)", ""]
    return "\n".join(lines).rstrip() + "\n"


def _anchor(title: str) -> str:
    return re.sub(r"[^a-z0-9 -]", "", title.lower()).replace(" ", "-")


def _display_argv(argv: list[str]) -> list[str]:
    """argv with the interpreter as `python`, the script relative, the scratch --out hidden."""
    shown = ["python", os.path.relpath(argv[1], ROOT)]
    rest = argv[2:]
    if "--out" in rest and rest.index("--out") == len(rest) - 2:
        rest = rest[:-2]
    return shown + rest


# --- main --------------------------------------------------------------------------------------------


def section_list(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown section(s) {', '.join(unknown)}; known: {', '.join(BY_NAME)}")
    return names


def parse_extra(items: list[str]) -> dict[str, list[str]]:
    extra: dict[str, list[str]] = {}
    for item in items:
        name, sep, rest = item.partition("=")
        if not sep or name not in BY_NAME:
            raise SystemExit(f"--extra wants SECTION=ARGS with SECTION one of {', '.join(BY_NAME)}: {item!r}")
        extra.setdefault(name, []).extend(shlex.split(rest))
    return extra


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small sizes: a smoke run of a few minutes")
    p.add_argument("--only", type=section_list, help="comma list of sections to run (in the suite's order)")
    p.add_argument("--skip", type=section_list, default=[], help="comma list of sections to leave out")
    p.add_argument(
        "--extra",
        action="append",
        default=[],
        metavar="SECTION=ARGS",
        help="more arguments for one bench, appended to its defaults (repeatable)",
    )
    p.add_argument(
        "--section-timeout",
        type=float,
        default=3 * 3600.0,
        help="seconds after which a bench is stopped and recorded as timed out",
    )
    p.add_argument("--out", type=Path, default=RESULTS / "report.md", help="the combined report to write")
    p.add_argument("--no-write", action="store_true", help="print the report only")
    p.add_argument("--logs", type=Path, help="keep each bench's output log in this folder")
    p.add_argument("--list", action="store_true", help="print the sections and their arguments, run nothing")
    args = p.parse_args(argv)
    extra = parse_extra(args.extra)
    chosen = [s for s in SECTIONS if (args.only is None or s.name in args.only) and s.name not in args.skip]
    if args.list:
        for s in SECTIONS:
            print(
                f"{s.name:15} python bench/{s.script} {' '.join(s.full) or '(defaults)'}\n{'':15} --quick: "
                f"{' '.join(s.quick)}"
            )
        return 0
    if not chosen:
        raise SystemExit("no section left to run")

    command = "python " + " ".join([os.path.relpath(sys.argv[0], ROOT)] + [shlex.quote(a) for a in sys.argv[1:]])
    started_at, started, load_start, commit = datetime.now(UTC), time.monotonic(), loadavg(), git_commit()
    scratch = Path(tempfile.mkdtemp(prefix="memworker-run-all-"))
    outcomes: list[Outcome] = []
    try:
        for i, section in enumerate(chosen, 1):
            out_dir = scratch / section.name
            out_dir.mkdir()
            cmd = bench_argv(section, args.quick, extra.get(section.name, []), out_dir)
            log(f"[{i}/{len(chosen)}] {section.name}: {' '.join(_display_argv(cmd))}; load {loadavg()}")
            outcome = run_section(section, cmd, out_dir, scratch / f"{section.name}.log", args.section_timeout)
            outcomes.append(outcome)
            log(f"[{i}/{len(chosen)}] {section.name}: {outcome.status} in {_duration(outcome.seconds)}")
            if outcome.status == "interrupted":
                break
    except KeyboardInterrupt:
        log("interrupted")
    finally:
        if args.logs:
            args.logs.mkdir(parents=True, exist_ok=True)
            for f in scratch.glob("*.log"):
                shutil.copy(f, args.logs / f.name)
        shutil.rmtree(scratch, ignore_errors=True)
    text = render(outcomes, args, command, started_at, time.monotonic() - started, load_start, loadavg(), commit)
    print(text)
    if not args.no_write:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        log(f"report written to {os.path.relpath(args.out, ROOT)}")
    return 0 if outcomes and all(o.status == "ok" for o in outcomes) and len(outcomes) == len(chosen) else 1


if __name__ == "__main__":
    sys.exit(main())
