"""Reading event ids back in tests: which sequence an id names in its job."""

from __future__ import annotations

from jobstream.protocol.events import parse_event_position


def parse_event_id(value: str, job_id: str) -> int | None:
    """The sequence an event id names in the job `job_id`, or None when it is not one of its."""
    position = parse_event_position(value, job_id)
    return position[1] if position is not None else None
