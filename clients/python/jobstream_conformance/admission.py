"""Submitting: admission, replay, conflict, lookups, validation errors, odd keys."""

from __future__ import annotations

from typing import Any

from jobstream_conformance.catalogue import Outcome
from jobstream_conformance.probe import Exchange
from jobstream_conformance.session import Check, Job, Session

UNKNOWN_JOB = "conformance-no-such-job"


def conflicting(params: dict[str, Any]) -> dict[str, Any]:
    """The same params with one more query tag: other params for the same key."""
    query = dict(params.get("query") or {})
    query["tags"] = [*(query.get("tags") or []), "conformance-extra-tag"]
    return {**params, "query": query}


def admission(session: Session) -> Job | None:
    """R8, R9, R10, R14, R15, R22, R48, C3, C4, C5, C7, C8, C9, C11, C13."""
    params = dict(session.config.params)
    task = session.task("main", params)
    first = session.a.submit(task)
    main = session.admitted("main", first)
    admitted(session, first, task)
    if main is None:
        reason = session.not_admitted(first, "the main Task (R8)")
        session.skip(reason, "R9", "R10", "R14", "R15", "C7", "C8")
        return None
    replay = session.a.submit(task)
    replayed(session, main, first, replay)
    conflict = session.a.submit(session.task("main", conflicting(params)))
    conflicted(session, main, replay, conflict)
    target_selector(session, params)
    return main


def admitted(session: Session, first: Exchange, task: dict[str, Any]) -> None:
    with session.item("R8") as check:
        job = session.accepted(check, first)["job"]
        check.expect(
            job["protocol_version"] == "1", f"protocol_version {job['protocol_version']!r}"
        )
        check.expect(job["job_type"] == session.job_type, f"job_type {job['job_type']!r}")
        check.expect(job["status"] in {"queued", "running"}, f"a new job is {job['status']!r}")
        check.expect(
            job.get("idempotency_key") == task["idempotency_key"], "idempotency_key not echoed"
        )
        check.expect(
            job.get("correlation_id") == session.correlation_id, "correlation_id not echoed"
        )
        check.expect(
            "refetch" not in job["job_id"] and "slot_id" not in job, "legacy names in the job"
        )
        check.note(f"{first}: job {job['job_id']} {job['status']}")
    with session.item("C3") as check:
        session.accepted(check, first)
        check.note("sent with no Idempotency-Key and no Accept header")
    with session.item("C9") as check:
        document = session.accepted(check, first)
        check.expect(set(document) == {"job"}, f"top-level keys {sorted(document)}, not only job")
        check.note('{"job": Job}')


def replayed(session: Session, main: Job, first: Exchange, replay: Exchange) -> None:
    with session.item("R14") as check:
        again = check.status(replay, 200, 202)["job"]
        check.expect(again["job_id"] == main.job_id, f"replay answered job {again['job_id']}")
        _only_job_for_key(session, check, main)
        check.note(f"replay → {replay.status} with {main.job_id}")
    with session.item("C7") as check:
        check.status(first, 202)
        check.status(replay, 200)
        check.note("new → 202, replay → 200")
    with session.item("R9") as check:
        fetched = check.status(session.refresh(main), 200)
        for name in ("job_id", "job_type", "created_at", "idempotency_key", "correlation_id"):
            check.expect(
                fetched.get(name) == first.document["job"].get(name),
                f"{name} {fetched.get(name)!r} differs from the admitted job's",
            )
        check.note(f"GET /jobs/{{id}} → 200, the admitted job ({fetched['status']})")
    with session.item("C13") as check:
        check.status(session.a.job(main.job_id), 200)
        error = check.error(session.a.job(UNKNOWN_JOB), 404)
        check.note(f"bare Job; unknown job → 404 {error.get('code')}")
    with session.item("R10") as check:
        _only_job_for_key(session, check, main)
        check.note("GET /jobs?idempotency_key → [that job]")


def conflicted(session: Session, main: Job, replay: Exchange, conflict: Exchange) -> None:
    for item_id in ("R15", "C8"):
        with session.item(item_id) as check:
            error = check.error(conflict, 409, "idempotency_conflict")
            check.expect(error["retryable"] is False, "retryable is not false")
            _only_job_for_key(session, check, main)
            check.note(f"{conflict} idempotency_conflict, retryable false; still one job")
    with session.item("R48") as check:
        check.expect(
            replay.status in {200, 202} and replay.document["job"]["job_id"] == main.job_id,
            "replay is another job",
        )
        check.error(conflict, 409, "idempotency_conflict")
        task = session.task("bad-type", session.config.params)
        error = check.error(session.a.submit({**task, "job_type": "video_upload"}), 400)
        check.note(f"replay same job; extra tag → 409; unknown job_type → 400 {error.get('code')}")


def _only_job_for_key(session: Session, check: Check, job: Job) -> None:
    page = check.status(session.a.list({"idempotency_key": job.key}), 200)
    ids = [item.get("job_id") for item in page["jobs"]]
    check.expect(ids == [job.job_id], f"GET /jobs?idempotency_key → {ids}, expected [{job.job_id}]")


def target_selector(session: Session, params: dict[str, Any]) -> None:
    """R22, R25, R27, C4, C5: the v1.1 target selector, when the producer declares it."""
    if "target_selector" not in session.features:
        session.skip(
            "the job type does not declare target_selector", "R22", "R25", "R27", "C4", "C5"
        )
        return
    target = params.get("target_id")
    main = session.jobs.get("main")
    for item_id in ("R22", "C5"):
        with session.item(item_id) as check:
            if not isinstance(target, str):
                check.skip("the main Task names no params.target_id (give --params with one)")
            check.expect(main is not None, "the Task with params.target_id was not admitted (R8)")
            check.note(f"target_selector declared; target_id {target!r} → 202")
    with session.item("C4") as check:
        if not isinstance(target, str):
            check.skip("no target known (give --params with a target_id)")
        if params == {"target_id": target}:
            check.expect(main is not None, "{target_id} only was not admitted (R8)")
            check.note("the main Task's params are only {target_id}")
        else:
            exchange = session.a.submit(session.task("target-only", {"target_id": target}))
            check.status(exchange, 202)
            session.admitted("target-only", exchange)
            check.note(f"params {{target_id: {target!r}}} → 202")
    with session.item("R25") as check:
        task = session.task(
            "unknown-target",
            {**params, "target_id": f"conformance-no-such-target-{session.run_id}"},
        )
        error = check.error(session.a.submit(task), 404, "invalid_params")
        reason = (error.get("detail") or {}).get("reason")
        check.expect(reason == "unknown_target", f"detail.reason {reason!r}, not unknown_target")
        page = check.status(session.a.list({"idempotency_key": task["idempotency_key"]}), 200)
        check.expect(page["jobs"] == [], "a job was created for the refused Task")
        check.note("404 invalid_params unknown_target; no job for its key")
    with session.item("R27") as check:
        for n, bad in enumerate((42, "", "   ")):
            task = session.task(f"bad-target-{n}", {**params, "target_id": bad})
            check.error(session.a.submit(task), 400, "invalid_params")
        check.note('target_id 42, "", "   " → 400 invalid_params')


def validation(session: Session) -> None:
    """R16, C17, E3: refused requests, each a 400/404 envelope, none creating a job."""
    params = dict(session.config.params)
    version = session.a.submit({**session.task("bad-version", params), "protocol_version": "2"})
    job_type = session.a.submit({**session.task("bad-type", params), "job_type": "video_upload"})
    bad_params = session.a.submit(session.task("bad-params", {"query": {"tags": []}}))
    unknown = session.a.job("does-not-exist")
    with session.item("R16") as check:
        error = check.error(version, 400, "unsupported_protocol_version")
        check.expect(error["retryable"] is False, "unsupported_protocol_version is retryable")
        check.error(job_type, 400, "invalid_params")
        error = check.error(bad_params, 400, "invalid_params")
        check.expect(error["retryable"] is False, "invalid_params is retryable")
        check.error(unknown, 404, "invalid_params")
        for name in ("bad-version", "bad-type", "bad-params"):
            page = check.status(session.a.list({"idempotency_key": session.key(name)}), 200)
            check.expect(page["jobs"] == [], f"the refused Task {name} created a job")
        check.note(
            "version 2 → 400, video_upload → 400, tags [] → 400, unknown job → 404; no job written"
        )
    with session.item("C17") as check:
        check.error(version, 400, "unsupported_protocol_version")
        error = check.error(job_type, 400, "invalid_params")
        reason = (error.get("detail") or {}).get("reason")
        check.expect(
            reason == "unsupported_job_type", f"detail.reason {reason!r}, not unsupported_job_type"
        )
        conflict = [
            e
            for e in session.exchanges
            if e.status == 409 and e.error.get("code") == "idempotency_conflict"
        ]
        if not conflict and session.verdicts["R15"].outcome is Outcome.SKIPPED:
            check.skip("no conflict could be provoked: R15 was not observed")
        check.expect(bool(conflict), "no 409 idempotency_conflict seen (R15)")
        check.note(
            "400 unsupported_protocol_version; 400 invalid_params/unsupported_job_type; "
            "409 idempotency_conflict"
        )
    with session.item("E3") as check:
        for exchange in (
            session.a.send("POST", "/jobs", raw_body=b'{"protocol_version": '),
            session.a.send("POST", "/jobs", raw_body=b"[]"),
            session.a.send("POST", "/jobs", raw_body=b"{}"),
        ):
            check.error(exchange, 400, "invalid_params")
        check.note("POST /jobs with broken JSON, [] and {} → 400 invalid_params envelopes")


def odd_key(session: Session) -> None:
    """C11, C12: a key with reserved and non-ASCII characters, and an unknown key."""
    key = f"conformance-{session.run_id}-odd/key:100% ü"
    task = {**session.task("odd", session.config.params), "idempotency_key": key}
    exchange = session.a.submit(task)
    with session.item("C12") as check:
        job = session.accepted(check, exchange)["job"]
        session.admitted("odd", exchange)
        check.expect(
            job.get("idempotency_key") == key, f"key echoed as {job.get('idempotency_key')!r}"
        )
        found = check.status(session.a.list({"idempotency_key": key}), 200)
        check.expect(
            [j.get("job_id") for j in found["jobs"]] == [job["job_id"]],
            "the key does not find its job",
        )
        check.status(session.a.job(job["job_id"]), 200)
        check.note(f"key {key!r} round-trips; job id {job['job_id']!r} resolves percent-encoded")
    with session.item("C11") as check:
        nothing = check.status(session.a.list({"idempotency_key": session.key("never-used")}), 200)
        check.expect(nothing["jobs"] == [], "an unknown key found jobs")
        check.note("an unknown key → 200 with []")
        if "odd" not in session.jobs:
            check.skip(session.not_admitted(exchange, "the Task with the odd key (C12)"))
        found = check.status(session.a.list({"idempotency_key": key}), 200)
        echoed = [j.get("idempotency_key") for j in found["jobs"]]
        check.expect(echoed == [key], f"echoed {echoed!r}")
        check.note("the key echoed byte for byte")
