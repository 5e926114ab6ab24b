"""Job types: what a job of each type does when it runs.

What a job type's package needs is exported here (docs/job-types.md): the `JobType` to
subclass, the `JobRun` and `ExecutionContext` its executor is given (and the interruptions a
checkpoint raises), the `Outcome` it returns, `ParsedParams` and `invalid_params` for its params
parser, the `Reason` codes a failure names, the `Target` its settings come from, and `register`.
"""

from jobstream.config.targets import Target, TargetsFile
from jobstream.jobtypes.base import JobRun, JobType, Outcome, ResultFits, ResultSummary
from jobstream.jobtypes.context import DeadlineReachedError, ExecutionContext, JobInterruptedError
from jobstream.jobtypes.registry import register
from jobstream.protocol.errors import Reason, invalid_params
from jobstream.protocol.task import ParsedParams, parse_target_id

__all__ = [
    "DeadlineReachedError",
    "ExecutionContext",
    "JobInterruptedError",
    "JobRun",
    "JobType",
    "Outcome",
    "ParsedParams",
    "Reason",
    "ResultFits",
    "ResultSummary",
    "Target",
    "TargetsFile",
    "invalid_params",
    "parse_target_id",
    "register",
]
