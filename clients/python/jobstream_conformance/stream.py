"""A finished job's stream: re-read, paged with `after`, refused bad input, acknowledged."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jobstream_conformance.lifecycle import terminal_event, types
from jobstream_conformance.probe import Exchange
from jobstream_conformance.session import TERMINAL, Job, Session

ITEMS = ("R33", "R34", "R35", "R36", "R37", "R40", "C18", "C19", "C20", "C21")


@dataclass(frozen=True)
class Stream:
    job: Job
    events: list[dict[str, Any]]

    @property
    def ids(self) -> list[str]:
        return [event["event_id"] for event in self.events]


def finished_stream(session: Session, main: Job, foreign_event_id: str | None) -> None:
    """R33-R37, R40, R50, C18-C21 on the main job's stream once it has finished."""
    if main.status not in TERMINAL:
        session.skip("the main job did not finish (R49)", "R50", *ITEMS)
        return
    first = session.a.events(main.job_id)
    with session.item("R50") as check:
        page = check.status(first, 200)
        events = page["events"]
        wanted = f"job.{main.status}"
        check.expect(wanted in types(events), f"no {wanted} in {types(events)}")
        check.expect(all(e["job_id"] == main.job_id for e in events), "another job's event")
        ats = [e["at"] for e in events]
        check.expect(ats == sorted(ats), f"at not ascending: {ats}")
        check.note(f"{types(events)}")
    document = first.document if isinstance(first.document, dict) else {}
    stream = Stream(main, list(document.get("events") or []))
    if len(stream.events) < 2:
        session.skip("the finished stream has fewer than 2 events", *ITEMS)
        return
    reading(session, stream)
    refusals(session, stream)
    forward_only(session, stream, foreign_event_id)
    last_ack(session, stream)
    terminal(session, stream)


def _ids(page: dict[str, Any]) -> list[str]:
    return [event["event_id"] for event in page["events"]]


def reading(session: Session, stream: Stream) -> None:
    job_id, ids = stream.job.job_id, stream.ids
    with session.item("C20") as check:
        again = check.status(session.a.events(job_id), 200)
        check.expect(_ids(again) == ids, "a re-read gives other ids")
        check.expect(len(set(ids)) == len(ids), f"duplicate ids {ids}")
        check.note(f"{len(ids)} ids unique and identical on a re-read")
    with session.item("R33") as check:
        page = check.status(session.a.events(job_id, {"after": ids[0]}), 200)
        check.expect(_ids(page) == ids[1:], f"?after=<first> gave {types(page['events'])}")
        check.expect(page.get("unacked") == len(ids), f"unacked {page.get('unacked')} with after")
        check.note(f"?after=<first> → the {len(ids) - 1} later events; unacked still {len(ids)}")
    with session.item("C18") as check:
        empty = check.status(session.a.events(job_id, {"after": ids[-1]}), 200)
        check.expect(empty["events"] == [], "events after the last one")
        check.note("?after=<last> → 200 []")


def refusals(session: Session, stream: Stream) -> None:
    job_id = stream.job.job_id
    with session.item("R36") as check:
        for body in ({}, {"ack_through": ""}, {"ack_through": 42}):
            check.error(session.a.ack(job_id, body), 400, "invalid_params")
        check.error(session.a.events(job_id, {"unacked": "maybe"}), 400, "invalid_params")
        check.error(session.a.events(job_id, {"after": ""}), 400, "invalid_params")
        page = check.status(session.a.events(job_id), 200)
        check.expect(page.get("unacked") == len(stream.ids), f"unacked is {page.get('unacked')}")
        check.note('{}, "", 42 → 400; ?unacked=maybe, ?after= → 400; unacked unchanged')


def _acked(session: Session, stream: Stream, through: str) -> tuple[Exchange, Any]:
    exchange = session.a.ack(stream.job.job_id, {"ack_through": through})
    document = exchange.document if isinstance(exchange.document, dict) else {}
    return exchange, (document.get("acked"), document.get("unacked"))


def forward_only(session: Session, stream: Stream, foreign_event_id: str | None) -> None:
    ids, total = stream.ids, len(stream.ids)
    with session.item("R35") as check:
        steps = [
            (f"conformance-unknown-{session.run_id}", (0, total), "an unknown id"),
            (ids[1], (2, total - 2), "the 2nd event"),
            (ids[0], (2, total - 2), "an older event"),
        ]
        if foreign_event_id is not None:
            steps.append((foreign_event_id, (2, total - 2), "another job's event"))
        for through, expected, what in steps:
            exchange, counts = _acked(session, stream, through)
            check.status(exchange, 200)
            check.expect(
                counts == expected, f"ack of {what} → acked/unacked {counts}, not {expected}"
            )
        check.note("unknown → acked 0; 2nd → 2; 1st → still 2; another job's id → still 2")
    with session.item("C18") as check:
        query = {"after": ids[1], "unacked": "1"}
        page = check.status(session.a.events(stream.job.job_id, query), 200)
        check.expect(_ids(page) == ids[2:], f"after+unacked=1 gave {types(page['events'])}")
        check.note("?after=<acked id>&unacked=1 → the events after the cursor")


def last_ack(session: Session, stream: Stream) -> None:
    job_id, total = stream.job.job_id, len(stream.ids)
    before = session.a.job(job_id)
    last, counts = _acked(session, stream, stream.ids[-1])
    after = session.a.job(job_id)
    with session.item("R34") as check:
        result = check.status(last, 200)
        check.expect(result["job_id"] == job_id, f"AckResult job_id {result['job_id']!r}")
        check.expect(counts == (total, 0), f"ack of the last → acked/unacked {counts}")
        check.expect(isinstance(result.get("server_time"), int), "no numeric server_time")
        again, counts = _acked(session, stream, stream.ids[-1])
        check.status(again, 200)
        check.expect(counts == (total, 0), f"the same ack again → {counts}")
        pending = check.status(session.a.events(job_id, {"unacked": "1"}), 200)
        check.expect((pending["events"], pending["unacked"]) == ([], 0), "?unacked=1 not empty")
        everything = check.status(session.a.events(job_id), 200)
        check.expect(len(everything["events"]) == total, "acked events gone from a plain read")
        check.note(f"acked {total}, unacked 0, twice; ?unacked=1 empty; plain read keeps all")
    with session.item("R37") as check:
        check.expect(check.status(before, 200) == check.status(after, 200), "the job changed")
        check.note("GET /jobs/{id} identical before and after the ack")
    with session.item("C21") as check:
        check.status(last, 200)
        check.expect(after.document.get("status") == stream.job.status, "the ack moved the status")
        check.note("AckResult; unknown/older no-ops (R35); idempotent; status kept; unacked 0")
    with session.item("R50") as check:
        check.expect(after.document.get("status") == stream.job.status, "status changed by ack")
        check.note("ack of the last → unacked 0, twice; status unchanged")


def terminal(session: Session, stream: Stream) -> None:
    status = stream.job.status
    with session.item("C19") as check:
        terminal_event(check, stream.events, status)
    with session.item("R40") as check:
        if status != "succeeded":
            check.skip(f"the main job ended {status}")
        payload = terminal_event(check, stream.events, "succeeded")["payload"]
        check.expect(isinstance(payload.get("result"), dict), "payload.result missing")
        check.expect(payload.get("error") is None, "payload.error on job.succeeded")
        check.note("with payload.result")
