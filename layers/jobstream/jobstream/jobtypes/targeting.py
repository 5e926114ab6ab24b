"""Choosing the configured target a job runs on (reference §2.3). Pure; a job type adds its
own rules around it."""

from __future__ import annotations

from collections.abc import Sequence

from jobstream.config.targets import Target
from jobstream.protocol.errors import ErrorKind, invalid_params
from jobstream.protocol.task import ParsedParams


def resolve_target(search: ParsedParams, enabled: Sequence[Target]) -> Target:
    """Among the `enabled` targets (those serving the job's type), the one `target_id` names,
    else the only one (refused as not found, a conflict or invalid otherwise)."""
    if search.target_id is not None:
        matches = [target for target in enabled if target.id == search.target_id]
        if not matches:
            raise invalid_params(
                "unknown target",
                kind=ErrorKind.NOT_FOUND,
                detail={"reason": "unknown_target", "target_id": search.target_id},
            )
        if len(matches) > 1:
            raise invalid_params(
                "ambiguous target",
                kind=ErrorKind.CONFLICT,
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
            kind=ErrorKind.CONFLICT,
            detail={"reason": "ambiguous_target", "targets": [target.id for target in enabled]},
        )
    return enabled[0]
