"""candidate_search admission rules for targets, accounts and work types (reference §2.3). Pure."""

from __future__ import annotations

from jobstream.config.targets import Target, TargetsFile
from jobstream.protocol.errors import invalid_params
from jobstream.protocol.js import js_trim
from jobstream.protocol.task import CandidateSearchRequest


def check_account(search: CandidateSearchRequest, targets: TargetsFile) -> None:
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


def resolve_target(search: CandidateSearchRequest, targets: TargetsFile) -> Target:
    enabled = targets.enabled
    if search.target_id is not None:
        matches = [target for target in enabled if target.id == search.target_id]
        if not matches:
            raise invalid_params(
                "unknown target",
                status=404,
                detail={"reason": "unknown_target", "target_id": search.target_id},
            )
        if len(matches) > 1:
            raise invalid_params(
                "ambiguous target",
                status=409,
                detail={"reason": "ambiguous_target", "target_id": search.target_id},
            )
        return matches[0]
    if not enabled:
        raise invalid_params(
            "no candidate search target is configured", detail={"reason": "no_eligible_target"}
        )
    if len(enabled) > 1:
        raise invalid_params(
            "more than one candidate search target is configured",
            status=409,
            detail={"reason": "ambiguous_target", "targets": [target.id for target in enabled]},
        )
    return enabled[0]


def check_work_type(search: CandidateSearchRequest, target: Target) -> None:
    work_types = search.work_types
    if work_types and target.work_type not in work_types:
        raise invalid_params(
            f"work_types {_js_array(work_types)} does not include the configured target work type",
            detail={"reason": "work_type_not_available", "target_type": target.work_type},
        )


def _js_array(values: list[str]) -> str:
    # String(array) in JavaScript: elements joined by commas inside the template's brackets.
    return "[" + ",".join(values) + "]"


def admit_target(search: CandidateSearchRequest, targets: TargetsFile) -> Target:
    """Apply the admission checks in the reference order and return the resolved target."""
    check_account(search, targets)
    target = resolve_target(search, targets)
    check_work_type(search, target)
    return target
