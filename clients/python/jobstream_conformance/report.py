"""The verdicts as a table for people, or as JSON for machines."""

from __future__ import annotations

import shutil
import textwrap
from collections import Counter
from typing import Any

from jobstream_conformance.catalogue import Outcome
from jobstream_conformance.session import NEEDS_PARAMS, Verdict

MARKS = {
    Outcome.PASS: "PASS",
    Outcome.FAIL: "FAIL",
    Outcome.NOT_APPLICABLE: "n/a",
    Outcome.SKIPPED: "skip",
}


def failed(verdicts: list[Verdict]) -> list[Verdict]:
    return [verdict for verdict in verdicts if verdict.outcome is Outcome.FAIL]


def totals(verdicts: list[Verdict]) -> str:
    counts = Counter(verdict.outcome for verdict in verdicts)
    return ", ".join(f"{counts[outcome]} {MARKS[outcome].lower()}" for outcome in MARKS)


def table(verdicts: list[Verdict], url: str, width: int | None = None) -> str:
    """One row per item: id, result, what is checked; the evidence wrapped below it."""
    columns = width or max(shutil.get_terminal_size((120, 24)).columns, 80)
    lines = [f"Workflow Protocol v1 conformance of {url}", "", f"{'ITEM':<5} {'RESULT':<6} CHECK"]
    indent = " " * 13
    for verdict in verdicts:
        lines.append(f"{verdict.id:<5} {MARKS[verdict.outcome]:<6} {verdict.title}")
        evidence = "; ".join(verdict.evidence)
        if evidence:
            lines += textwrap.wrap(
                evidence, columns, initial_indent=indent, subsequent_indent=indent
            )
    bad = failed(verdicts)
    lines += ["", totals(verdicts)]
    lines.append(
        f"NOT CONFORMANT: {', '.join(v.id for v in bad)} failed"
        if bad
        else "conformant: every item observable over HTTP in this run passed"
    )
    unobserved = needing_params(verdicts)
    if unobserved:
        lines.append(
            f"{len(unobserved)} items were not observed: the producer refused a Task with no "
            "params; run again with --params of a Task it admits (and --cancel-params)"
        )
    return "\n".join(lines)


def needing_params(verdicts: list[Verdict]) -> list[Verdict]:
    """The items skipped because no --params were given and the producer needs some."""
    return [
        verdict
        for verdict in verdicts
        if verdict.outcome is Outcome.SKIPPED
        and any(evidence.startswith(NEEDS_PARAMS) for evidence in verdict.evidence)
    ]


def as_json(verdicts: list[Verdict], url: str) -> dict[str, Any]:
    return {
        "url": url,
        "conformant": not failed(verdicts),
        "totals": {outcome.value: sum(v.outcome is outcome for v in verdicts) for outcome in MARKS},
        "items": [
            {
                "id": v.id,
                "title": v.title,
                "outcome": v.outcome.value,
                "evidence": v.evidence,
            }
            for v in verdicts
        ],
    }
