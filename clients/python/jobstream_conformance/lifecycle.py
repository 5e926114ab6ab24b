"""Jobs running to their end, and their event streams: read, paged, acknowledged."""

from __future__ import annotations

from typing import Any

from jobstream_conformance.probe import Exchange
from jobstream_conformance.session import TERMINAL, Check, Job, Session

UNKNOWN_JOB = "conformance-no-such-job"
MS_AFTER_2001 = 10**12  # epoch milliseconds of any date this century are larger
CLOCK_SKEW_MS = 300_000
HEARTBEAT_FRESH_MS = 90_000  # the consumer's freshness window


def fresh_events(session: Session, main: Job) -> None:
    """R30: the stream of a job just admitted (it may have started since)."""
    exchange = session.a.events(main.job_id)
    with session.item("R30") as check:
        page = check.status(exchange, 200)
        events = page["events"]
        check.expect(page["job_id"] == main.job_id, f"page job_id {page['job_id']!r}")
        check.expect(
            bool(events) and events[0]["type"] == "job.accepted",
            f"first event {types(events)[:1]}",
        )
        check.expect(
            page.get("unacked") == len(events),
            f"unacked {page.get('unacked')} with {len(events)} events, none acked",
        )
        check.expect(isinstance(page.get("server_time"), int), "no numeric server_time")
        check.expect(not page.get("next_after"), "next_after on a page that holds the whole stream")
        for event in events:
            check.expect(event["job_id"] == main.job_id, f"event of job {event['job_id']!r}")
            check.expect(
                event.get("correlation_id") == session.correlation_id,
                "correlation_id not on the event",
            )
            check.expect(isinstance(event["at"], int) and event["at"] > 0, f"at {event['at']!r}")
        ids = [event["event_id"] for event in events]
        check.expect(len(set(ids)) == len(ids), f"duplicate event ids {ids}")
        check.note(f"{types(events)}, unacked {page.get('unacked')}")


def types(events: list[dict[str, Any]]) -> list[str]:
    return [str(event.get("type")) for event in events]


def run_to_the_end(session: Session, main: Job) -> None:
    """R49, R11, R13, C15, C16, R19 (deadline): poll the main job until it finishes."""
    polls = session.wait(main)
    with session.item("R49") as check:
        for exchange in polls:
            job = check.status(exchange, 200)
            check.expect(job["updated_at"] > 0, "updated_at is 0")
            check.expect(
                not [k for k in job if k.startswith("refetch")], "refetch* keys in the job"
            )
        check.expect(
            main.status in TERMINAL, f"still {main.status} after {session.config.timeout_s} s"
        )
        check.note(f"{len(polls)} polls, all 200 and valid: {' → '.join(_distinct(main.statuses))}")
    with session.item("R11") as check:
        queued = [job for _, job in session.job_documents() if job["status"] == "queued"]
        if not queued:
            check.skip("no job of this run was seen queued")
        for job in queued:
            check.expect(
                job.get("started_at") is None, f"queued with started_at {job.get('started_at')}"
            )
            check.expect(not job.get("lease_active"), "queued with an active lease")
        check.note(
            f"{len(queued)} queued documents: started_at null, no active lease, numeric times"
        )
    with session.item("R13") as check:
        if main.status != "succeeded":
            check.skip(
                f"the main job ended {main.status} {_code(main.document)}: "
                "give --params of a Task that succeeds"
            )
        job = main.document
        check.expect(isinstance(job.get("result"), dict), "no result")
        check.expect(job.get("error") is None, f"error {job.get('error')} on a succeeded job")
        check.expect(job["updated_at"] >= job["created_at"], "updated_at before created_at")
        check.note(f"succeeded with result keys {sorted(job['result'])}")
    with session.item("R19") as check:
        declared = _declared(session)
        deadline_at, ceiling = main.document.get("deadline_at"), declared.get("default_deadline_ms")
        if deadline_at is None or not isinstance(ceiling, int):
            check.skip("no deadline_at or default_deadline_ms to compare")
        span = deadline_at - main.document["created_at"]
        check.expect(
            0 < span <= ceiling,
            f"deadline_at - created_at = {span} ms, declared default_deadline_ms {ceiling}",
        )
        check.note(f"deadline_at - created_at = {span} ms ≤ default_deadline_ms {ceiling}")


def _declared(session: Session) -> dict[str, Any]:
    job_types = (session.capabilities or {}).get("job_types") or []
    return next((dict(t) for t in job_types if t.get("name") == session.job_type), {})


def _distinct(values: list[str]) -> list[str]:
    return [value for n, value in enumerate(values) if n == 0 or values[n - 1] != value]


def _code(job: dict[str, Any]) -> str:
    error = job.get("error")
    return str(error.get("code")) if isinstance(error, dict) else ""


def terminal_event(check: Check, events: list[dict[str, Any]], status: str) -> dict[str, Any]:
    event = events[-1]
    check.expect(
        event["type"] == f"job.{status}", f"last event {event['type']}, expected job.{status}"
    )
    job = event.get("payload", {}).get("job")
    check.expect(
        isinstance(job, dict) and job.get("status") == status, f"payload.job.status is not {status}"
    )
    check.note(f"job.{status} last, payload.job.status {status}")
    return event


def cancellation(session: Session) -> Job | None:
    """R17, R41: a job cancelled (while running, given a long Task) and its stream."""
    params = session.config.long_params
    exchange = session.a.submit(session.task("cancel", params))
    job = session.admitted("cancel", exchange)
    if job is None:
        session.skip(session.not_admitted(exchange, "the cancel Task"), "R17", "R41")
        return None
    if session.config.cancel_params is not None:
        # A long Task: cancel it while it runs (and see it running: R12).
        until = frozenset({"running", *TERMINAL})
        session.wait(job, until=until, timeout_s=min(session.config.timeout_s, 15))
    # Otherwise at once: the Task may finish before any wait is over.
    was = job.status
    first = session.a.cancel(job.job_id)
    second = session.a.cancel(job.job_id)
    with session.item("R17") as check:
        document = check.status(first, 200)
        ended = _ended_before(first)
        if ended is not None:
            check.skip(
                f"the job had ended {ended} before the cancel (answered unchanged): "
                "give --cancel-params of a longer Task"
            )
        check.expect(document["status"] == "cancelled", f"status {document['status']} after cancel")
        error = document.get("error") or {}
        check.expect(error.get("code") == "cancelled_by_consumer", f"error {error}")
        check.expect(error.get("retryable") is False, "cancelled_by_consumer is retryable")
        check.expect(check.status(second, 200) == document, "a second cancel answers another body")
        check.note(f"cancelled while {was}: 200 cancelled_by_consumer, twice identical")
    if _ended_before(first) is not None:
        session.skip("the job had ended before the cancel (R17)", "R41")
        return job
    session.refresh(job)
    with session.item("R41") as check:
        page = check.status(session.a.events(job.job_id), 200)
        check.expect(
            "job.cancelled" in types(page["events"]),
            f"no job.cancelled in {types(page['events'])}",
        )
        event = terminal_event(check, page["events"], "cancelled")
        code = (event["payload"].get("error") or {}).get("code")
        check.expect(code == "cancelled_by_consumer", f"payload.error.code {code!r}")
    return job


def _ended_before(cancel: Exchange) -> str | None:
    """How the job had ended when a cancel answered it unchanged: a job may finish between
    the last read and the cancel."""
    status = cancel.document.get("status") if isinstance(cancel.document, dict) else None
    return str(status) if status in TERMINAL - {"cancelled"} else None


def cancel_of_a_finished_job(session: Session, main: Job) -> None:
    """R17: cancelling a finished job answers it unchanged."""
    if main.status not in TERMINAL:
        return
    with session.item("R17") as check:
        unchanged = check.status(session.a.cancel(main.job_id), 200)
        check.expect(unchanged["status"] == main.status, f"cancel changed a {main.status} job")
        check.note(f"cancel of the {main.status} main job → 200, unchanged")


def observe_running(session: Session) -> None:
    """R12, C15 from the first answer that showed a job of the run running."""
    seen = [job.running for job in session.jobs.values() if job.running is not None]
    with session.item("R12") as check:
        if not seen:
            check.skip(
                "no job of this run was seen running (give --cancel-params of a longer Task)"
            )
        running = seen[0].document
        for name in ("started_at", "heartbeat_at", "lease_expires_at"):
            check.expect(
                isinstance(running.get(name), int), f"{name} is {running.get(name)!r} while running"
            )
        check.expect(running.get("lease_active") is True, "lease_active is not true while running")
        check.note("started_at, heartbeat_at, lease_expires_at numeric; lease_active true")
    with session.item("C15") as check:
        documents = session.job_documents()
        for _, job in documents:
            for name in ("created_at", "updated_at"):
                check.expect(
                    job[name] > MS_AFTER_2001, f"{name} {job[name]} is not epoch milliseconds"
                )
        for exchange in session.exchanges:
            server_time = (
                exchange.document.get("server_time")
                if isinstance(exchange.document, dict)
                else None
            )
            if isinstance(server_time, int):
                skew = server_time - exchange.received_at_ms
                check.expect(
                    abs(skew) <= CLOCK_SKEW_MS, f"server_time {skew} ms off the kit's clock"
                )
        if seen:
            running = seen[0].document
            beat = max(running.get("heartbeat_at") or 0, running["updated_at"])
            age = seen[0].received_at_ms - beat
            check.expect(age <= HEARTBEAT_FRESH_MS, f"a running job's heartbeat is {age} ms old")
            check.note(f"a running job's heartbeat {age} ms old")
        check.note(
            f"{len(documents)} Job documents in epoch ms; server_time within {CLOCK_SKEW_MS} ms"
        )


def failing_job(session: Session) -> None:
    """R38, R42, C14, C6: a Task that finds nothing, sent with callback_url null."""
    params = session.config.fail_params
    if params is None:
        query = {"tags": [f"conformance-no-such-tag-{session.run_id}"]}
        params = {**session.config.params, "query": query}
    exchange = session.a.submit(session.task("fail", params, callback_url=None))
    job = session.admitted("fail", exchange)
    with session.item("R42") as check:
        session.accepted(check, exchange)
        if job is None:
            check.skip("not admitted")
        page = check.status(session.a.events(job.job_id), 200)
        check.expect(types(page["events"])[:1] == ["job.accepted"], "no job.accepted to pull")
        check.note("callback_url null → 202; events pullable")
    with session.item("C6") as check:
        session.accepted(check, exchange)
        main = session.jobs.get("main")
        check.expect(
            main is not None and main.document.get("correlation_id") == session.correlation_id,
            "correlation_id not echoed (R8)",
        )
        check.note("correlation_id echoed; callback_url null, no labels, no deadline_ms accepted")
    job = session.jobs.get("fail")  # what R42 saw admitted
    if job is None:
        session.skip(session.not_admitted(exchange, "the failing Task"), "R38", "C14")
        return
    session.wait(job)
    with session.item("C14") as check:
        if job.status == "succeeded":
            found = (job.document.get("result") or {}).get("candidates")
            check.expect(
                found != [], "nothing found, yet succeeded (must be failed + no_candidate)"
            )
            check.skip("the Task meant to find nothing found something (give --fail-params)")
        check.expect(job.status == "failed", f"ended {job.status}, not failed")
        code = _code(job.document)
        check.expect(code == "no_candidate", f"failed with {code!r}, not no_candidate")
        check.note("nothing found → failed + no_candidate")
    with session.item("R38") as check:
        if job.status != "failed":
            check.skip(f"the Task meant to fail ended {job.status}")
        page = check.status(session.a.events(job.job_id), 200)
        events = page["events"]
        event = terminal_event(check, events, "failed")
        error = event["payload"].get("error")
        check.expect(
            isinstance(error, dict) and error.get("code") == _code(job.document),
            f"payload.error {error}",
        )
        check.expect(event["payload"].get("result") is None, "payload.result on job.failed")
        acked = check.status(session.a.ack(job.job_id, {"ack_through": event["event_id"]}), 200)
        check.expect(acked["unacked"] == 0, f"unacked {acked['unacked']} after acking job.failed")
        again = check.status(session.a.events(job.job_id), 200)
        check.expect(again["events"] == events, "the stream changed after the ack")
        error_code = error.get("code") if isinstance(error, dict) else None
        check.note(f"{types(events)}; payload.error {error_code}; acked, still readable")


def unknown_jobs(session: Session) -> None:
    """R32, E2: an unknown job on every job route, and an unknown route."""
    with session.item("R32") as check:
        error = check.error(session.a.events(UNKNOWN_JOB), 404, "invalid_params")
        check.note(f"404 {error['code']}")
    with session.item("E2") as check:
        for exchange in (
            session.a.job(UNKNOWN_JOB),
            session.a.cancel(UNKNOWN_JOB),
            session.a.events(UNKNOWN_JOB),
            session.a.ack(UNKNOWN_JOB, {"ack_through": "x"}),
            session.a.send("GET", "/conformance-no-such-route"),
        ):
            error = check.error(exchange, 404)
            check.expect(error.get("retryable") is False, f"{exchange}: retryable 404")
        check.note(
            "GET, cancel, events, ack of an unknown job and an unknown route → 404 envelopes"
        )
