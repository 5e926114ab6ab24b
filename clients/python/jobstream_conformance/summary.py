"""Checks over everything the run was answered: schema, names, envelopes, terminal documents."""

from __future__ import annotations

from collections import Counter
from typing import Any

from jobstream_conformance.probe import ENVELOPE, RECEIPT
from jobstream_conformance.schema import protocol
from jobstream_conformance.session import Session

# Consumer business words no published key may contain (reference §8 items 7 and 18).
BUSINESS_TERMS = (
    "refetch",
    "review",
    "slot",
    "telegram",
    "message_id",
    "disposition",
    "submission",
    "moderation",
)
# A consumer's decoder prefers these legacy names over the snake_case fields (consumer §3.10).
LEGACY_KEYS = {
    "requestId": "job_id",
    "jobId": "job_id",
    "state": "status",
    "heartbeatAt": "heartbeat_at",
    "updatedAt": "updated_at",
    "startedAt": "started_at",
    "createdAt": "created_at",
    "errorCode": "error",
    "failureCode": "error",
}
TRANSIENT = {408, 429}


def keys_of(document: Any) -> set[str]:
    if isinstance(document, dict):
        return set(document).union(*(keys_of(value) for value in document.values()))
    if isinstance(document, list):
        return set().union(*(keys_of(value) for value in document))
    return set()


def summary(session: Session) -> None:
    answered = [e for e in session.exchanges if e.definition is not None]
    with session.item("S1") as check:
        broken = [e for e in answered if e.schema_errors]
        counts = Counter(e.definition for e in answered)
        counts["Event (callback)"] = len(session.callback_events)
        check.note(", ".join(f"{name} {count}" for name, count in sorted(counts.items()) if count))
        for exchange in broken[:3]:
            check.note(f"{exchange}: {exchange.definition}: {exchange.schema_errors[0]}")
        check.expect(not broken, f"{len(broken)} of {len(answered)} documents do not validate")
        check.note(f"all {len(answered) + len(session.callback_events)} documents valid")
    documents = [e.document for e in answered if isinstance(e.document, dict)]
    jobs = [job for _, job in session.job_documents()]
    with session.item("R18") as check:
        named = sorted(
            key for key in keys_of(documents) if any(term in key.lower() for term in BUSINESS_TERMS)
        )
        check.expect(not named, f"business terms in keys: {named}")
        receipts = [e.document for e in answered if e.definition == RECEIPT and e.status < 300]
        extra = [sorted(r) for r in receipts if isinstance(r, dict) and set(r) != {"job"}]
        check.expect(not extra, f"POST /jobs answered keys {extra[:1]}, not only job")
        check.note(
            f"no business term in the keys of {len(documents)} documents; POST answers only {{job}}"
        )
    with session.item("C24") as check:
        refetch = sorted(key for key in keys_of(jobs) if key.lower().startswith("refetch"))
        check.expect(not refetch, f"refetch keys in Jobs: {refetch}")
        check.note(f"no refetch* key in {len(jobs)} Jobs")
    with session.item("C10") as check:
        for job in jobs:
            for legacy, field in LEGACY_KEYS.items():
                if legacy in job and job[legacy] != job.get(field):
                    check.expect(False, f"legacy {legacy}={job[legacy]!r} contradicts {field}")
        check.note(f"no contradicting camelCase key in {len(jobs)} Jobs")
    with session.item("C16") as check:
        terminal = [job for job in jobs if job["status"] in {"failed", "cancelled", "expired"}]
        for job in terminal:
            error = job.get("error") or {}
            check.expect(error.get("code") in protocol().error_codes, f"error {error or None}")
            check.expect(isinstance(error.get("retryable"), bool), "error.retryable missing")
        succeeded = [job for job in jobs if job["status"] == "succeeded"]
        for job in succeeded:
            check.expect(isinstance(job.get("result"), dict), "a succeeded job without result")
        if not terminal and not succeeded:
            check.skip("no finished job seen")
        check.note(
            f"{len(terminal)} failed/cancelled/expired documents with error, "
            f"{len(succeeded)} succeeded with result"
        )
    with session.item("E4") as check:
        requests = [
            e
            for e in answered
            if e.definition == ENVELOPE
            and 400 <= e.status < 500
            and e.status not in TRANSIENT
            and not e.schema_errors
        ]
        for exchange in requests:
            code, retryable = exchange.error["code"], exchange.error["retryable"]
            default = protocol().default_retryable(code)
            check.expect(
                retryable is False and retryable == default,
                f"{exchange}: {code} retryable {retryable} (protocol default {default})",
            )
        check.note(f"{len(requests)} request errors, all retryable false as their codes' defaults")
    with session.item("C2") as check:
        refused = [e for e in session.exchanges if e.authenticated and e.status in {401, 403}]
        check.expect(not refused, f"the run's own token was refused: {refused[:1]}")
        used = sum(exchange.authenticated for exchange in session.exchanges)
        check.note(f"the token was accepted on all {used} calls made with it")
