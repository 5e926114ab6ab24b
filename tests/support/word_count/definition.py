"""word_count: counts the words of `params.text`, one checkpoint and progress report per word.

A type written against the job-type authors' face (`jobstream.jobtypes`) only, and one that runs
without targets: it declares no settings model, so its jobs have none."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from pydantic import BaseModel

from jobstream.jobtypes import JobRun, JobType, Outcome, ParsedParams, invalid_params
from jobstream.protocol.models import NonNegativeInt, ProtocolModel

MAX_TEXT = 1000


class WordCount(JobType):
    """Count the words of `params.text`."""

    name = "word_count"
    stages = ("counting",)
    empty_result = MappingProxyType({"words": 0})
    features = ("events", "progress", "cancel", "idempotency")

    def parse_params(self, params: Any) -> ParsedParams:
        if not isinstance(params, dict):
            raise invalid_params("params must be a JSON object")
        text = params.get("text")
        if not isinstance(text, str) or not text.strip() or len(text) > MAX_TEXT:
            raise invalid_params(
                f"params.text must be a non-empty string of at most {MAX_TEXT} chars"
            )
        return ParsedParams(params={"text": text})

    def run(self, job: JobRun) -> Outcome:
        words = job.params["text"].split()
        for index, _word in enumerate(words):
            job.context.checkpoint()
            job.context.progress("counting", f"word {index + 1} of {len(words)}")
        return Outcome(result={"words": len(words)})

    def result_model(self) -> type[BaseModel]:
        return ResultWordCount


class ResultWordCount(ProtocolModel):
    words: NonNegativeInt


JOB_TYPE = WordCount()
