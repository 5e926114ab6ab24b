"""Two consumers: neither sees, cancels, reads or acknowledges the other's jobs; listing pages."""

from __future__ import annotations

from jobstream_client.transport import Query
from jobstream_conformance.session import Session

TENANCY = ("T1", "T2", "T3", "T4", "T5", "T6")


def tenancy(session: Session) -> None:
    b = session.b
    if b is None:
        session.skip("give --token-b (the token of a second consumer)", *TENANCY)
        return
    params = session.config.long_params
    exchange = session.a.submit(session.task("tenancy", params))
    job = session.admitted("tenancy", exchange)
    if job is None:
        session.skip(session.not_admitted(exchange, "consumer A's Task"), *TENANCY)
        return
    events = session.a.events(job.job_id).document or {}
    first_id = (events.get("events") or [{}])[0].get("event_id", "x")
    unacked = events.get("unacked")
    with session.item("T1") as check:
        error = check.error(b.job(job.job_id), 404)
        check.note(f"B's GET of A's job → 404 {error.get('code')}")
    with session.item("T2") as check:
        check.error(b.cancel(job.job_id), 404)
        after = check.status(session.refresh(job), 200)
        check.expect(after["status"] != "cancelled", "B's cancel cancelled A's job")
        check.note(f"B's cancel → 404; A's job still {after['status']}")
    with session.item("T3") as check:
        check.error(b.events(job.job_id), 404)
        check.error(b.events(job.job_id, {"unacked": "1"}), 404)
        check.note("B's events of A's job → 404")
    with session.item("T4") as check:
        check.error(b.ack(job.job_id, {"ack_through": first_id}), 404)
        page = check.status(session.a.events(job.job_id), 200)
        check.expect(page["unacked"] >= (unacked or 0), "B's ack moved A's cursor")
        check.note("B's ack on A's job → 404; A's cursor unchanged")
    with session.item("T5") as check:
        page = check.status(b.list({"idempotency_key": job.key}), 200)
        check.expect(page["jobs"] == [], f"B finds A's job by its key: {page['jobs'][:1]}")
        check.note("B's GET /jobs?idempotency_key=<A's key> → []")
    with session.item("T6") as check:
        theirs = b.submit(session.task("tenancy", params))
        document = check.status(theirs, 202)
        session.admitted("b-tenancy", theirs)
        check.expect(document["job"]["job_id"] != job.job_id, "B's submit answered A's job")
        check.note(f"B's Task with A's key → 202, its own job {document['job']['job_id']}")


def listing(session: Session) -> None:
    """P1: every job of this run (one correlation id), one per page, each exactly once."""
    mine = {job.job_id for job in session.jobs.values() if not job.name.startswith("b-")}
    with session.item("P1") as check:
        query: Query = {"correlation_id": session.correlation_id, "limit": 1}
        first = session.a.list(query)
        if first.status == 400:
            check.skip(f"GET /jobs needs idempotency_key here ({first.error.get('message')})")
        listed: list[str] = []
        page = check.status(first, 200)
        for _ in range(len(mine) + 2):
            check.expect(len(page["jobs"]) <= 1, f"limit=1 answered {len(page['jobs'])} jobs")
            listed += [job["job_id"] for job in page["jobs"]]
            cursor = page.get("next_cursor")
            if not cursor:
                break
            page = check.status(session.a.list({**query, "cursor": cursor}), 200)
        check.expect(len(listed) == len(set(listed)), "a job listed twice")
        check.expect(set(listed) == mine, f"listed {len(listed)} of the run's {len(mine)} jobs")
        check.note(f"{len(listed)} pages of 1 job via next_cursor: all {len(mine)} jobs of the run")
