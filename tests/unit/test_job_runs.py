"""The job-type authors' test harness (tests/support/job_runs.py), shown on word_count: a type
written against `jobstream.jobtypes` alone, without targets."""

from __future__ import annotations

import pytest

from jobstream.jobtypes import DeadlineReachedError, JobInterruptedError, Outcome
from tests.support.job_runs import RecordingContext, job_run
from tests.support.word_count.definition import JOB_TYPE


def test_a_run_reports_its_progress_and_passes_its_checkpoints() -> None:
    context = RecordingContext()
    outcome = JOB_TYPE.run(job_run({"text": "one two three"}, context=context))
    assert outcome == Outcome(result={"words": 3})
    assert context.stages == ["counting"] * 3
    assert context.progress_log[-1] == ("counting", "word 3 of 3")
    assert context.checkpoints == 3


@pytest.mark.parametrize(
    ("stop", "raised"),
    [
        ("cancel", JobInterruptedError),
        ("lose_lease", JobInterruptedError),
        ("pass_deadline", DeadlineReachedError),
    ],
)
def test_each_switch_stops_the_run_at_its_checkpoint(
    stop: str, raised: type[JobInterruptedError]
) -> None:
    context = RecordingContext()
    getattr(context, stop)(at_checkpoint=2)
    with pytest.raises(raised):
        JOB_TYPE.run(job_run({"text": "one two three"}, context=context))
    assert context.checkpoints == 2
    assert context.stages == ["counting"]  # the second word was never reached


def test_a_switch_armed_without_a_checkpoint_stops_the_next_one() -> None:
    context = RecordingContext()
    context.checkpoint()
    context.cancel()
    with pytest.raises(JobInterruptedError):
        context.checkpoint()


def test_a_type_without_targets_selects_none_and_names_its_stages() -> None:
    parsed = JOB_TYPE.parse_params({"text": "a"})
    assert not JOB_TYPE.uses_targets
    assert JOB_TYPE.select_target(parsed, targets=None) is None  # type: ignore[arg-type]
    assert JOB_TYPE.first_stage == "counting"
    assert dict(JOB_TYPE.empty_result) == {"words": 0}
