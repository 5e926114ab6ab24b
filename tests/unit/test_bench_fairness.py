"""The fairness run's report: its own section of docs/load.md, replaced on every run."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import fairness

FIGURES = {
    "backlog": 1000.0,
    "noisy_submit_s": 20.0,
    "quiet_max_s": 1.7,
    "quiet_median_s": 1.5,
    "noisy_queued": 900.0,
}


def test_the_section_replaces_its_last_run_and_keeps_the_load_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = tmp_path / "load.md"
    report.write_text("# Load test\n\nnumbers\n", encoding="utf-8")
    monkeypatch.setattr(fairness, "REPORT", report)
    fairness.write_section(fairness.section({**FIGURES, "quiet_max_s": 9.0}))
    fairness.write_section(fairness.section(FIGURES))
    text = report.read_text(encoding="utf-8")
    assert text.startswith("# Load test\n\nnumbers\n\n## Fairness across tenants\n")
    assert text.count(fairness.SECTION) == 1
    assert "| `quiet`'s jobs, submission to running: slowest | 1.70 s |" in text
    assert "| `noisy`'s jobs still queued when `quiet`'s had started | 900 |" in text
