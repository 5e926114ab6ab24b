"""Every item the kit reports on, in report order, with what it checks over HTTP.

Sources: the reference producer's conformance checklist (`R<n>`: the protocol reference §8,
numbered as there), the real consumer's requirements (`C<n>`: TelePost's producer checklist,
numbered as there), error envelopes (`E`), tenancy (`T`), listing (`P`), schema validation of
every answered document (`S1`), the kit's own protocol copy (`K1`) and the extensions a
producer advertises (`X`: skipped, saying so, when it advertises none). An item that needs the
producer's source tree, storage or configuration carries the reason it is not applicable.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Outcome(StrEnum):
    PASS = "pass"  # noqa: S105 - a verdict, not a password
    FAIL = "fail"
    NOT_APPLICABLE = "n/a"  # cannot be observed over HTTP at all (needs internals)
    SKIPPED = "skip"  # observable, but this run could not (a missing option, a precondition)


@dataclass(frozen=True)
class Item:
    id: str
    title: str
    not_applicable: str | None = None  # why no HTTP client can check it


SOURCE_TREE = "concerns the producer's vendored protocol files, which no route serves"
LEGACY = "the legacy /internal routes are not part of Workflow Protocol v1"

ITEMS: tuple[Item, ...] = (
    Item("K1", "the kit's copy of the protocol schema is the published one (sha256)"),
    Item("S1", "every document answered validates against the protocol schema"),
    # --- reference §8: contract -----------------------------------------------------------
    Item(
        "R1", "vendored protocol directory complete", SOURCE_TREE + " (the kit checks its own: K1)"
    ),
    Item("R2", "every $ref of the schema resolves", SOURCE_TREE + " (the kit's copy: K1)"),
    Item("R3", "every fixture validates", "fixtures are example documents, not served"),
    Item("R4", "SOURCES.sha256 matches", SOURCE_TREE + " (the kit's copy: K1)"),
    Item(
        "R5",
        "error mapping covers the internal reason codes",
        "internal reason codes are the producer's source",
    ),
    Item(
        "R6",
        "a Job with an unknown nested field validates",
        "a property of the schema, not of a producer (the kit's decoding ignores unknown fields)",
    ),
    Item(
        "R7",
        "no business term in schema names",
        "names inside the schema; the HTTP counterpart is R18 on every answered document",
    ),
    # --- reference §8: job facade ---------------------------------------------------------
    Item("R8", "POST /jobs (new) → 202 {job}: a valid queued Job echoing key and correlation"),
    Item("R9", "GET /jobs/{id} → 200 valid Job, the same job as admitted"),
    Item("R10", "GET /jobs?idempotency_key → 200 JobPage with exactly that job"),
    Item("R11", "a queued job: started_at null, lease_active false, numeric times"),
    Item("R12", "a running job: started_at, heartbeat_at, lease_active, lease_expires_at"),
    Item("R13", "a succeeded job: result, no error, valid"),
    Item("R14", "re-POST of the same Task → same job, one job for the key"),
    Item("R15", "same key, other params → 409 idempotency_conflict (retryable false), one job"),
    Item("R16", "unsupported version / job_type / bad params → 400, unknown job → 404"),
    Item("R17", "cancel → 200 cancelled_by_consumer, idempotent; a finished job unchanged"),
    Item("R18", "no business term in any key; POST answers only {job}"),
    Item("R19", "capabilities valid and honest: schemas named, budgets, deadline_at within them"),
    Item("R20", "legacy refetch route shares the identity space", LEGACY),
    Item("R21", "job API off → 503 internal_error", "needs a producer started without its job API"),
    Item("R22", "v1.1 selector: a Task with params.target_id → 202 valid Job"),
    Item("R23", "stored params of a selector-only job", "stored params are internal"),
    Item(
        "R24",
        "no selector, several eligible targets → 409 ambiguous_target",
        "needs a producer configured with several eligible targets; "
        "its configuration is not visible over HTTP",
    ),
    Item("R25", "unknown target_id → 404 unknown_target, no job created"),
    Item(
        "R26",
        "target without delivery wiring → 500",
        "needs a misconfigured target (producer configuration)",
    ),
    Item("R27", 'target_id 42, "", "   " → 400 invalid_params'),
    Item("R28", "legacy refetch after a generic job with a selector", LEGACY),
    Item("R29", "capabilities features include target_selector and events"),
    # --- reference §8: event stream -------------------------------------------------------
    Item("R30", "events of a new job: valid EventPage, job.accepted first, unacked counts all"),
    Item("R31", "events and ack without a bearer token → 401"),
    Item("R32", "events of an unknown job → 404 invalid_params"),
    Item("R33", "events ascending by at; ?after=<id> is exclusive; unacked ignores after"),
    Item(
        "R34", "ack of the last event → AckResult acked=n unacked=0, idempotent; ?unacked=1 empty"
    ),
    Item("R35", "ack of unknown, older or foreign ids is a 200 no-op; never rewinds"),
    Item("R36", "bad ack bodies and ?unacked=maybe → 400; cursor unchanged"),
    Item("R37", "GET /jobs/{id} is the same before and after an ack"),
    Item(
        "R38",
        "a failed job: terminal event with payload.job and payload.error; ack keeps it readable",
    ),
    Item(
        "R39",
        "queued too long → job.expired queued_too_long",
        "needs a job left unclaimed for the producer's queued budget (30 min by default); "
        "forcing it needs the producer's internals",
    ),
    Item("R40", "a succeeded job's stream ends with job.succeeded carrying job and result"),
    Item("R41", "after cancel the stream contains job.cancelled"),
    Item("R42", "a Task with callback_url null is admitted and its events are pullable"),
    Item("R43", "with a callback_url every event is POSTed there as a valid Event"),
    Item("R44", "a delivered callback does not move the pull ack cursor"),
    Item(
        "R45",
        "callback retry and dead-letter state",
        "needs the producer's outbox state; a retry over HTTP waits the producer's "
        "retry base (30 s by default)",
    ),
    Item("R46", "internal event kinds all mapped", "internal kinds are the producer's source"),
    Item("R47", "capabilities: version 1, the job type, positive budgets"),
    Item("R48", "replay same job; extra tag → 409; unknown job_type → 400 with a code"),
    Item(
        "R49",
        "polling GET /jobs/{id}: always 200 and valid until a terminal status; no refetch keys",
    ),
    Item(
        "R50", "a terminal job's stream: valid, contains job.<status>, ascending; ack to unacked 0"
    ),
    Item("R51", "legacy shim equivalence", LEGACY),
    # --- consumer (TelePost) requirements --------------------------------------------------
    Item("C1", "GET /capabilities: protocol 1 and the job type with params and result schemas"),
    Item("C2", "bearer token accepted on every route, refused with an envelope (see E1)"),
    Item("C3", "no Idempotency-Key or Accept header required"),
    Item("C4", "a Task whose params are only {target_id} is admitted"),
    Item("C5", "target_id accepted and target_selector declared"),
    Item("C6", "correlation_id and callback_url accepted; labels and deadline_ms optional"),
    Item("C7", "first admission exactly 202, replay exactly 200, never 201"),
    Item("C8", "same key, other params → 409 idempotency_conflict retryable false"),
    Item("C9", 'POST /jobs answers {"job": Job}'),
    Item("C10", "no legacy camelCase keys that contradict the Job's fields"),
    Item("C11", "GET /jobs?idempotency_key echoes the key byte for byte; unknown key → []"),
    Item("C12", "percent-encoded keys and job ids round-trip (/ : % space non-ASCII)"),
    Item("C13", "GET /jobs/{id} bare Job; unknown → 404 envelope"),
    Item("C14", "statuses from the enum; nothing found → failed + no_candidate"),
    Item("C15", "epoch-ms timestamps, sane clock, fresh heartbeat while running"),
    Item("C16", "terminal jobs carry error (closed code, retryable) or result"),
    Item("C17", "error statuses: 400 version / unsupported_job_type, 409 conflict"),
    Item("C18", "events accept after + unacked=1 together; ascending; empty page not 404"),
    Item("C19", "the stream of a finished job has its terminal event with payload.job"),
    Item("C20", "event ids unique and stable across reads (and callbacks)"),
    Item("C21", "ack: AckResult, unknown/older no-op, idempotent, status unchanged, unacked 0"),
    Item("C22", "callbacks: bare Event, Content-Type JSON, the consumer's bearer token"),
    Item("C23", "the pull path works without callback_url; a failing callback changes nothing"),
    Item("C24", "no refetch* names in the /jobs projection"),
    # --- envelopes, tenancy, listing -------------------------------------------------------
    Item("E1", "401 envelope on every route: no token, wrong token, other scheme"),
    Item("E2", "404 envelope for an unknown job on every job route, and for an unknown route"),
    Item("E3", "400 envelope for malformed bodies and queries"),
    Item("E4", "request errors are not retryable (the protocol's defaults)"),
    Item("T1", "another tenant's job: GET → 404"),
    Item("T2", "another tenant's job: cancel → 404, the job untouched"),
    Item("T3", "another tenant's job: events → 404"),
    Item("T4", "another tenant's job: ack → 404, the cursor untouched"),
    Item("T5", "another tenant's key: GET /jobs?idempotency_key → []"),
    Item("T6", "another tenant's key: submitting it makes a job of one's own"),
    Item("P1", "GET /jobs pages with limit and next_cursor, each job once"),
    # --- extensions, when the producer advertises them (capabilities.extensions) -----------
    Item("X1", "event_feed: GET /events shows every event of the run's jobs once, in job order"),
    Item("X2", "event_feed: a long-poll issued before a submission answers its job.accepted"),
    Item("X3", "event_feed: a named cursor moves forward only and ?consumer= resumes after it"),
    Item("X4", "event_feed: an edited or another consumer's cursor → 400 invalid_params"),
    Item("X5", "deliveries: a job's callbacks, the dead list and redrive answer, never another's"),
)

BY_ID = {item.id: item for item in ITEMS}
