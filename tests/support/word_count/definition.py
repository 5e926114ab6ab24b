"""word_count: counts the words of `params.text`, one checkpoint and progress report per word."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jobstream.jobtypes.base import JobRun, JobType, Outcome
from jobstream.jobtypes.targeting import resolve_target
from jobstream.protocol.errors import invalid_params
from jobstream.protocol.models import NonNegativeInt, ProtocolModel
from jobstream.protocol.task import ParsedParams, parse_target_id

MAX_TEXT = 1000


def parse_params(params: Any) -> ParsedParams:
    if not isinstance(params, dict):
        raise invalid_params("params must be a JSON object")
    text = params.get("text")
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_TEXT:
        raise invalid_params(f"params.text must be a non-empty string of at most {MAX_TEXT} chars")
    return ParsedParams(params={"text": text}, target_id=parse_target_id(params.get("target_id")))


def run(job: JobRun) -> Outcome:
    words = job.params["text"].split()
    for index, _word in enumerate(words):
        job.context.checkpoint()
        job.context.progress("counting", f"word {index + 1} of {len(words)}")
    return Outcome(result={"words": len(words)})


class ResultWordCount(ProtocolModel):
    words: NonNegativeInt


JOB_TYPE = JobType(
    name="word_count",
    home=Path(__file__).parent,
    parse_params=parse_params,
    select_target=resolve_target,
    run=run,
    result_model=lambda: ResultWordCount,
    features=("events", "progress", "cancel", "idempotency"),
)
