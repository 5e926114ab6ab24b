"""candidate_search's target rules: account, target, work type (reference §2.3). Pure."""

from __future__ import annotations

from jobstream.config.targets import Target, TargetsFile
from jobstream.jobtypes.candidate_search.params import CandidateSearchParams
from jobstream.jobtypes.candidate_search.settings import search_settings
from jobstream.jobtypes.targeting import resolve_target
from jobstream.protocol.errors import invalid_params
from jobstream.protocol.js import js_trim
from jobstream.protocol.task import ParsedParams


def check_account(search: CandidateSearchParams, targets: TargetsFile) -> None:
    requested = search.account
    if requested is None:
        return
    wanted = js_trim(requested) or "default"
    configured = js_trim(targets.account) or "default"
    if wanted != configured:
        raise invalid_params(
            f"account '{wanted}' is not available in this deployment",
            detail={"reason": "account_unavailable", "requested": wanted, "configured": configured},
        )


def check_work_type(search: CandidateSearchParams, target: Target) -> None:
    work_types = search.work_types
    work_type = search_settings(target).work_type
    if work_types and work_type not in work_types:
        raise invalid_params(
            f"work_types {_js_array(work_types)} does not include the configured target work type",
            detail={"reason": "work_type_not_available", "target_type": work_type},
        )


def _js_array(values: list[str]) -> str:
    # String(array) in JavaScript: elements joined by commas inside the template's brackets.
    return "[" + ",".join(values) + "]"


def admit_target(search: ParsedParams, targets: TargetsFile, job_type: str) -> Target:
    """Apply the admission checks in the reference order and return the resolved target among
    those serving `job_type`."""
    if not isinstance(search, CandidateSearchParams):
        raise TypeError("candidate_search target rules need candidate_search params")
    check_account(search, targets)
    target = resolve_target(search, targets.enabled_for(job_type))
    check_work_type(search, target)
    return target
