"""bench/run_all.py's own logic, without a stack: a bench that writes its report, one that
fails and one that writes nothing are each recorded as such in the combined report, and the
headline extractors read the tables the real benches write."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import run_all  # noqa: E402


def _section(tmp_path: Path, name: str, code: str) -> run_all.Section:
    script = tmp_path / f"{name}.py"
    script.write_text(code)
    return run_all.Section(
        name, f"Fake {name}", str(script), (), (), f"{name}.md", headline=lambda md: "headline: " + md.splitlines()[0]
    )


def _run(tmp_path: Path, section: run_all.Section, timeout_s: float = 60.0) -> run_all.Outcome:
    out = tmp_path / f"out-{section.name}"
    out.mkdir()
    argv = [sys.executable, section.script]
    return run_all.run_section(section, argv, out, tmp_path / f"{section.name}.log", timeout_s)


def test_sections_ok_failed_and_silent_are_each_recorded(tmp_path: Path) -> None:
    ok = _section(
        tmp_path,
        "good",
        "import os, pathlib\n"
        "p = pathlib.Path(os.environ['MEMWORKER_BENCH_RESULTS']) / 'good.md'\n"
        "p.write_text('# Good bench\\n\\n## Part\\n\\n| a | b |\\n|---|---|\\n| 1 | 2 |\\n')\n"
        "print('progress line')\n",
    )
    bad = _section(tmp_path, "bad", "print('about to fail')\nraise SystemExit(3)\n")
    silent = _section(tmp_path, "silent", "print('done, but no report')\n")
    outcomes = [_run(tmp_path, s) for s in (ok, bad, silent)]
    assert [o.status for o in outcomes] == ["ok", "failed (exit 3)", "no report written"]
    assert outcomes[1].tail == ["about to fail"]

    args = argparse.Namespace(quick=True)
    text = run_all.render(
        outcomes,
        args,
        "python bench/run_all.py --quick",
        datetime.now(UTC),
        1.0,
        "0.1 0.1 0.1",
        "0.2 0.2 0.2",
        "abc1234",
    )
    assert "| [good](#1-fake-good) | ok |" in text
    assert "headline: # Good bench" in text
    assert "### Good bench" in text and "#### Part" in text  # the bench's headings, demoted
    assert "**failed (exit 3)**" in text and "about to fail" in text
    assert "**no report written**" in text


def test_a_bench_past_its_timeout_is_stopped(tmp_path: Path) -> None:
    slow = _section(tmp_path, "slow", "import time\nprint('sleeping', flush=True)\ntime.sleep(120)\n")
    outcome = _run(tmp_path, slow, timeout_s=1.0)
    assert outcome.status == "timed out after 1 s"
    assert outcome.seconds < 60


def test_headlines_read_the_benches_tables() -> None:
    recall = (
        "Target: server-side p50 (1 client, uncached) <= 2 x (a + b) = 2 x (4.23 + 2.63) = **13.72 ms**; "
        "measured **18.10 ms**: misses the target.\n\n"
        "| run | clients | answered | errors | QPS | server p50 |\n|---|---|---|---|---|---|\n"
        "| 1 client, uncached | 1 | 400 | 0 | 44.0 | 18.10 |\n"
        "| 16 clients, uncached | 16 | 800 | 0 | 63.6 | 198.60 |\n"
    )
    assert run_all._recall_headline(recall) == (
        "1-client uncached server p50 18.10 ms vs target <= 13.72 ms (misses); 16 clients: p50 198.60 ms, 63.6 QPS"
    )
    repeated = recall + "\nMet in 2 of 3; median p50 / target 1.02.\n"
    assert run_all._recall_headline(repeated) == (
        "1-client uncached server p50 18.10 ms vs target <= 13.72 ms "
        "(misses); target met in 2 of 3 checks (median 1.02 x); "
        "16 clients: p50 198.60 ms, 63.6 QPS"
    )
    consolidation = (
        "| workers | passes | total s | passes/s | memories consolidated | memories/s | p50 | p95 |\n"
        "|---|---|---|---|---|---|---|---|\n| 1 | 1,000 | 77.9 | 12.8 | 20,000 | 256.7 | 70 | 90 |\n"
        "| 2 | 1,000 | 37.7 | 26.5 | 20,000 | 530.5 | 70 | 90 |\n\n"
        "**Ratio time(1 worker) / time(2 workers): 2.07x.**\n"
    )
    assert run_all._consolidation_headline(consolidation) == "1 worker(s) 77.9 s, 2 worker(s) 37.7 s; ratio 2.07x"
    locomo = "| system | R@5 | R@10 |\n|---|---|---|\n| memworker | 0.572 | 0.655 |\n| BM25 | 0.443 | 0.516 |\n"
    assert run_all._locomo_headline(locomo) == "memworker R@5 0.572 / R@10 0.655 (BM25 0.443 / 0.516)"
    assert run_all._ingest_headline("no table here") == ""


def test_headlines_read_the_fleet_and_knowledge_update_tables() -> None:
    updates = (
        "## Updates (after the sweep)\n\n| split | source | updates | handled |\n|---|---|---|---|\n"
        "| dev | handwritten | 103 | 59.2 % (61) |\n| dev | all | 115 | 54.8 % (63) |\n"
        "| test | all | 114 | 50.0 % (57) |\n\n"
        "## Look-alikes that are both true\n\n| split | source | cases | false alarm |\n|---|---|---|---|\n"
        "| dev | all | 115 | 0.9 % (1) |\n\n"
        "## Contradictions\n\n| split | source | cases | review |\n|---|---|---|---|\n| dev | all | 10 | 10.0 % (1) |\n"
    )
    assert run_all._knowledge_updates_headline(updates) == (
        "updates handled (dev) 54.8 %, updates handled (test) 50.0 %, false alarms (dev) 0.9 %, reviewed (dev) 10.0 %"
    )
    assert run_all._knowledge_updates_headline("## The rules only") == ""
    fleet = (
        "40 agents x 20 subjects x 20 facts (16000 facts; ingest 900 s).\n\n"
        "| memories | crossed | open reviews | across | derived | mixing |\n|---|---|---|---|---|---|\n"
        "| 320 | 0 | 2 | 0 | 70 | 0 |\n\n"
        "|  | mean R@5 | min | subjects |\n|---|---|---|---|\n| ratio | 1.000 |  |  |\n\n"
        "## Knowledge updates within subjects\n\n| shape | pairs | right at ingest |\n|---|---|---|\n"
        "| paraphrase | 25 | 96.0 % |\n\n"
        "|  | p50 ms |\n|---|---|\n| ratio (p50) | 1.83 |\n"
    )
    assert run_all._fleet_headline(fleet) == (
        "40 agents x 20 subjects x 20 facts; crossed 0, reviews across subjects 0, mixed derived 0; "
        "R@5 fleet / single 1.000; right at ingest: paraphrase 96.0 %; recall p50 across agents / one agent 1.83"
    )


def test_section_names_are_checked() -> None:
    assert run_all.section_list("recall_latency, locomo_recall") == ["recall_latency", "locomo_recall"]
    with pytest.raises(argparse.ArgumentTypeError):
        run_all.section_list("recall")
    assert run_all.parse_extra(["recall_latency=--agents 5 --clients 1"]) == {
        "recall_latency": ["--agents", "5", "--clients", "1"]
    }
    with pytest.raises(SystemExit):
        run_all.parse_extra(["nope=--x"])
