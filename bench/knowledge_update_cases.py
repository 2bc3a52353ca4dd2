"""The knowledge-update cases of bench/knowledge_updates.py: loading, the dev/test split, and
the rebuild of the cases taken from LoCoMo and BEAM (not a benchmark itself).

Each case is one JSON line in bench/data/knowledge_updates/{dev,test}.jsonl:
{"id", "source": "handwritten" | "locomo" | "beam", "attribute", "older": [messages said
first], "newer": [messages said later], "question", "new_value", "old_value",
"label": "update" | "both_true" | "contradiction", "subject" (optional), "split"}.

- update: the newer messages change a fact the older ones stated; the stale memory must be
  superseded (or sent to review) and the question must find new_value before old_value.
- both_true: two look-alike statements that are both true (other people, additions,
  history, plans, questions, other instances); neither may be superseded or reviewed.
- contradiction: two statements of the same person that cannot both be true and where no
  later one obviously wins (BEAM's contradiction_resolution); a person must decide, so the
  right outcome is a review.

The split is a fixed hash of the id, so a case never changes half. The test half is frozen:
rules are tuned on the dev half only.

    python bench/knowledge_update_cases.py [--benchdata DIR]   # rebuild the locomo and beam cases

keeps every handwritten case as it is and rewrites the two files."""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from pathlib import Path
from typing import Any

CASES_DIR = Path(__file__).resolve().parent / "data" / "knowledge_updates"
SPLITS = ("dev", "test")
LABELS = ("update", "both_true", "contradiction")
SOURCES = ("handwritten", "locomo", "beam")
BENCHDATA = Path("/work/shared/benchdata")

Case = dict[str, Any]


def split_of(case_id: str) -> str:
    """dev or test, from the id alone (sha256, first byte's low bit): stable across rebuilds."""
    return SPLITS[hashlib.sha256(case_id.encode()).digest()[0] & 1]


def load_cases(split: str = "dev") -> list[Case]:
    """The cases of one split ("dev", "test") or of both ("all"), in file order."""
    names = SPLITS if split == "all" else (split,)
    cases: list[Case] = []
    for name in names:
        path = CASES_DIR / f"{name}.jsonl"
        cases += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return cases


def check(case: Case) -> None:
    """A case is usable when its values are said where they should be: new_value in the
    newer messages, old_value in the older ones (case-insensitive)."""
    assert case["label"] in LABELS and case["source"] in SOURCES, case["id"]
    assert case["older"] and case["newer"], case["id"]
    newer, older = " ".join(case["newer"]).casefold(), " ".join(case["older"]).casefold()
    assert case["new_value"].casefold() in newer, f"{case['id']}: new_value not in the newer messages"
    assert case["old_value"].casefold() in older, f"{case['id']}: old_value not in the older messages"


def write_cases(cases: list[Case]) -> dict[str, int]:
    """Both files, each case checked and stamped with its split; returns the counts."""
    counts = dict.fromkeys(SPLITS, 0)
    CASES_DIR.mkdir(parents=True, exist_ok=True)
    ids = [c["id"] for c in cases]
    assert len(ids) == len(set(ids)), "duplicate case ids"
    lines: dict[str, list[str]] = {s: [] for s in SPLITS}
    for case in cases:
        check(case)
        case["split"] = split_of(case["id"])
        counts[case["split"]] += 1
        lines[case["split"]].append(json.dumps(case, ensure_ascii=False))
    for name in SPLITS:
        (CASES_DIR / f"{name}.jsonl").write_text("\n".join(lines[name]) + "\n")
    return counts


# --- BEAM: every knowledge_update and contradiction_resolution question, checked by hand ---
# (conversation, category, question index, older message ids, newer message ids, old_value,
# new_value, attribute). The ids are the chat's user messages that say the old and the new
# value; where the question's source_chat_ids point at a message without the value (or at the
# same message twice), the ids below are the ones that do. Knowledge update 9/1 has no user
# message with the new date (May 22), so it is left out; contradictions 2/1, 3/1 and 4/1 pair
# statements that do not contradict each other (the "first statement" is about something
# else), so they are left out too.
BEAM_PICKS: list[tuple[int, str, int, list[int], list[int], str, str, str]] = [
    (1, "knowledge_update", 0, [104], [114], "300ms", "250ms", "response time"),
    (1, "knowledge_update", 1, [148], [182], "150 commits", "165", "count"),
    (2, "knowledge_update", 0, [32], [66], "1000 calls/day", "1,200 calls per day", "quota"),
    (2, "knowledge_update", 1, [114], [128], "65%", "78%", "coverage"),
    (3, "knowledge_update", 0, [12], [52], "April 1, 2024", "April 5, 2024", "deadline"),
    (3, "knowledge_update", 1, [60], [116], "8 cards", "10 cards", "count"),
    (4, "knowledge_update", 0, [82], [130], "90%", "95%", "accuracy"),
    (4, "knowledge_update", 1, [30], [58], "10 classification problems", "15 classification problems", "count"),
    (5, "knowledge_update", 0, [44], [62], "3 hours", "4 hours", "duration"),
    (5, "knowledge_update", 1, [84], [130], "8 problems", "12 conditional probability problems", "count"),
    (6, "knowledge_update", 0, [62], [92], "3 interviews", "5 interviews", "count"),
    (6, "knowledge_update", 1, [182], [192], "5 women", "increased to 7", "count"),
    (7, "knowledge_update", 0, [82], [110], "45 sources", "52 sources", "count"),
    (7, "knowledge_update", 1, [116], [158], "4,500 words", "4,700 words", "count"),
    (8, "knowledge_update", 0, [92], [94], "April 21 at 3 PM", "April 22 at 11 AM", "date/time"),
    (8, "knowledge_update", 1, [208], [214], "2 remote workdays", "three days a week", "schedule"),
    (9, "knowledge_update", 0, [44], [46], "3 PM", "4:30 PM", "time"),
    (10, "knowledge_update", 0, [22], [64], "1,200 words", "1,350 words", "goal"),
    (10, "knowledge_update", 1, [86], [168], "April 20", "April 25", "deadline"),
    (
        1,
        "contradiction_resolution",
        0,
        [24],
        [58],
        "homepage route with Flask",
        "never written any Flask routes",
        "experience",
    ),
    (1, "contradiction_resolution", 1, [66], [114], "integrate Flask-Login", "never actually integrated", "experience"),
    (
        2,
        "contradiction_resolution",
        0,
        [32],
        [70],
        "API key obtained on March 10",
        "never actually obtained an API key",
        "status",
    ),
    (
        3,
        "contradiction_resolution",
        0,
        [36],
        [56],
        "Bootstrap 5.3.0",
        "never implemented any Bootstrap components",
        "experience",
    ),
    (
        4,
        "contradiction_resolution",
        0,
        [30],
        [58],
        "completed 10 classification problems",
        "never attempted any triangle classification",
        "experience",
    ),
    (
        5,
        "contradiction_resolution",
        0,
        [36],
        [66],
        "5 coin toss problems",
        "never completed any coin toss problems",
        "experience",
    ),
    (
        5,
        "contradiction_resolution",
        1,
        [84],
        [134],
        "conditional probability problems improved",
        "never practiced any conditional probability",
        "experience",
    ),
    (6, "contradiction_resolution", 0, [22], [48], "LinkedIn Learning course", "never actually enrolled", "experience"),
    (6, "contradiction_resolution", 1, [82], [96], "attended a workshop", "never attended any workshops", "experience"),
    (
        7,
        "contradiction_resolution",
        0,
        [38],
        [52],
        "downloaded Zotero",
        "never used any citation management software",
        "experience",
    ),
    (
        7,
        "contradiction_resolution",
        1,
        [80],
        [114],
        "missing the April 5 one",
        "never missed any scheduled writing sessions",
        "experience",
    ),
    (
        8,
        "contradiction_resolution",
        0,
        [16],
        [50],
        "collaborating with my child Michael",
        "never worked with my child Michael",
        "experience",
    ),
    (
        8,
        "contradiction_resolution",
        1,
        [86],
        [104],
        "submitted my cover letter to Greg",
        "never submitted my cover letter",
        "status",
    ),
    (9, "contradiction_resolution", 0, [4], [50], "advice I got from Bryan", "never met Bryan", "experience"),
    (
        9,
        "contradiction_resolution",
        1,
        [92],
        [102],
        "enrolled in a 4-week online course",
        "never taken any academic writing courses",
        "experience",
    ),
    (
        10,
        "contradiction_resolution",
        0,
        [56],
        [68],
        "anxious about my grammar accuracy",
        "never felt anxious about grammar accuracy",
        "feeling",
    ),
    (
        10,
        "contradiction_resolution",
        1,
        [82],
        [174],
        "completed my first draft",
        "never completed a first draft",
        "status",
    ),
]

_BEAM_MARKER = re.compile(r"\s*->->\s*\d+\s*,\s*\d+\s*$")


def beam_cases(benchdata: Path) -> list[Case]:
    cases = []
    for conv, category, index, old_ids, new_ids, old_value, new_value, attribute in BEAM_PICKS:
        root = benchdata / "beam" / "100K" / str(conv)
        question = json.loads((root / "probing_questions.json").read_text())[category][index]["question"]
        messages = {
            m["id"]: m for batch in json.loads((root / "chat.json").read_text()) for t in batch["turns"] for m in t
        }
        text = [_BEAM_MARKER.sub("", messages[i]["content"]) for i in old_ids + new_ids]
        assert all(messages[i]["role"] == "user" for i in old_ids + new_ids)
        update = category == "knowledge_update"
        cases.append(
            {
                "id": f"beam-{conv}-{'ku' if update else 'cr'}{index}",
                "source": "beam",
                "attribute": attribute,
                "older": text[: len(old_ids)],
                "newer": text[len(old_ids) :],
                "question": question,
                "new_value": new_value,
                "old_value": old_value,
                "label": "update" if update else "contradiction",
            }
        )
    return cases


# --- LoCoMo: facts of one speaker that change between sessions, and look-alikes, by hand ---
# (id, conversation, older dia ids, newer dia ids, label, attribute, question, old_value, new_value)
LOCOMO_PICKS: list[tuple[str, int, list[str], list[str], str, str, str, str, str]] = [
    (
        "lc-jon-studio",
        1,
        ["D3:1"],
        ["D15:13"],
        "update",
        "status",
        "Has Jon opened his dance studio?",
        "searching for a place",
        "grand opening",
    ),
    (
        "lc-john-job-lost",
        2,
        ["D19:8"],
        ["D28:1"],
        "update",
        "workplace",
        "Does John still work at the mechanical engineering company?",
        "assistant manager",
        "lost my job",
    ),
    (
        "lc-john-job-new",
        2,
        ["D28:1"],
        ["D28:5"],
        "update",
        "workplace",
        "Where is John going to work?",
        "lost my job",
        "tech company",
    ),
    (
        "lc-evan-married",
        8,
        ["D5:1"],
        ["D21:2"],
        "update",
        "relationship",
        "Is Evan married?",
        "met this awesome Canadian woman",
        "got married",
    ),
    (
        "lc-john-dream-job",
        6,
        ["D8:2"],
        ["D13:3"],
        "update",
        "workplace",
        "What work is John doing?",
        "freelance programming",
        "dream job",
    ),
    (
        "lc-andrew-dogs",
        5,
        ["D27:5"],
        ["D28:6"],
        "update",
        "count",
        "How many dogs does Andrew have?",
        "two dogs",
        "adpot another dog",
    ),
    (
        "lc-gina-store",
        1,
        ["D1:3"],
        ["D2:1"],
        "update",
        "workplace",
        "What does Gina do for work?",
        "lost my job at Door Dash",
        "clothing store",
    ),
    (
        "lc-jon-gina-jobs",
        1,
        ["D1:2"],
        ["D1:3"],
        "both_true",
        "workplace",
        "Where did Gina lose her job?",
        "banker",
        "Door Dash",
    ),
    (
        "lc-jon-gina-business",
        1,
        ["D1:4"],
        ["D2:1"],
        "both_true",
        "business",
        "What business did Gina start?",
        "dance studio",
        "clothing store",
    ),
    (
        "lc-maria-pups",
        2,
        ["D30:1"],
        ["D31:2", "D31:4"],
        "both_true",
        "pets",
        "What is the name of Maria's shelter pup?",
        "Coco",
        "Shadow",
    ),
    (
        "lc-andrew-pups",
        5,
        ["D24:2"],
        ["D28:6"],
        "both_true",
        "pets",
        "Did Andrew adopt another dog recently?",
        "adopted another pup",
        "another dog",
    ),
    (
        "lc-melanie-pets",
        0,
        ["D7:18"],
        ["D13:4"],
        "both_true",
        "pets",
        "What is Melanie's new cat called?",
        "Luna and Oliver",
        "Bailey",
    ),
    (
        "lc-evan-sam-diet",
        8,
        ["D15:8"],
        ["D9:1"],
        "both_true",
        "diet",
        "When did Sam start a new diet?",
        "Changed my diet",
        "new diet",
    ),
    (
        "lc-jolene-snakes",
        7,
        ["D2:20"],
        ["D2:22"],
        "both_true",
        "pets",
        "What is Jolene's second snake called?",
        "Susie",
        "Seraphim",
    ),
    (
        "lc-calvin-car",
        9,
        ["D1:3"],
        ["D2:1"],
        "both_true",
        "possessions",
        "What did Calvin buy recently?",
        "mansion",
        "new car",
    ),
    (
        "lc-dave-calvin-cars",
        9,
        ["D2:1"],
        ["D4:2"],
        "both_true",
        "cars",
        "What did Dave open?",
        "luxury car",
        "car maintenance shop",
    ),
]


def locomo_cases(benchdata: Path) -> list[Case]:
    convs = json.loads((benchdata / "locomo" / "locomo10.json").read_text())
    cases = []
    for cid, conv, old_ids, new_ids, label, attribute, question, old_value, new_value in LOCOMO_PICKS:
        turns = {
            t["dia_id"]: t
            for key, session in convs[conv]["conversation"].items()
            if re.fullmatch(r"session_\d+", key)
            for t in session
        }
        speakers = {turns[i]["speaker"] for i in old_ids + new_ids}
        case: Case = {
            "id": cid,
            "source": "locomo",
            "attribute": attribute,
            "older": [turns[i]["text"] for i in old_ids],
            "newer": [turns[i]["text"] for i in new_ids],
            "question": question,
            "new_value": new_value,
            "old_value": old_value,
            "label": label,
        }
        if len(speakers) == 1:  # one person's facts: that person is the episodes' subject
            case["subject"] = speakers.pop().lower()
        cases.append(case)
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--benchdata", type=Path, default=BENCHDATA, help="holds locomo/ and beam/100K/")
    parser.add_argument("--add", type=Path, help="a JSONL file of handwritten cases to add (new ids only)")
    args = parser.parse_args()
    kept = [c for c in load_cases("all") if c["source"] == "handwritten"] if (CASES_DIR / "dev.jsonl").exists() else []
    if args.add:
        known = {c["id"] for c in kept}
        kept += [
            c
            for line in args.add.read_text().splitlines()
            if line.strip() and (c := json.loads(line))["id"] not in known
        ]
    cases = kept + locomo_cases(args.benchdata) + beam_cases(args.benchdata)
    counts = write_cases(cases)
    print(f"{len(cases)} cases: {counts}")


if __name__ == "__main__":
    main()
