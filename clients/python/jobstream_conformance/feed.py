"""The `event_feed` extension (GET /events, POST /events/ack), checked when the producer
advertises it in `capabilities.extensions`, skipped (saying so) when it does not."""

from __future__ import annotations

import base64
import binascii
import threading
import time
from typing import Any, Final

from jobstream_conformance.probe import Exchange
from jobstream_conformance.session import Check, Session, Skipped

FEED: Final = ("X1", "X2", "X3", "X4")
# How much of a feed the kit reads to find its end before the run (pages of 200).
CATCH_UP_PAGES: Final = 100
# The long-poll X2 issues, and how soon after the submission's answer its own must come: the
# extension promises well under a second after the commit; the rest is the network's margin.
WAIT_MS: Final = 10_000
ANSWER_WITHIN_S: Final = 2.0
# How long after its last write the kit reads the feed (it shows events once they settled).
SETTLE_S: Final = 1.0


def advertised(session: Session) -> bool:
    extensions = (session.capabilities or {}).get("extensions")
    return isinstance(extensions, dict) and isinstance(extensions.get("event_feed"), dict)


def read(session: Session, query: dict[str, Any], **options: Any) -> Exchange:
    return session.a.send("GET", "/events", query=query, **options)


def start(session: Session) -> str | None:
    """Where A's feed ends before the run's jobs (None: not advertised, or not reachable)."""
    if not advertised(session):
        session.skip("the producer does not advertise extensions.event_feed in capabilities", *FEED)
        return None
    cursor: str | None = None
    for _ in range(CATCH_UP_PAGES):
        exchange = read(session, {"after": cursor, "limit": 200})
        document = exchange.document
        if exchange.status != 200 or not isinstance(document, dict):
            with session.item("X1") as check:
                check.status(exchange, 200)
            session.skip(f"the feed could not be read: {exchange}", *FEED[1:])
            return None
        cursor = str(document.get("next_after"))
        if not document.get("has_more"):
            return cursor
    session.skip(f"the feed holds over {CATCH_UP_PAGES * 200} events before this run", *FEED)
    return None


def long_poll(session: Session, after: str) -> None:
    """X2: a long-poll issued before a submission answers with its job.accepted, soon."""
    answers: list[tuple[Exchange, float]] = []

    def poll() -> None:
        timeout_s = session.config.request_timeout_s + WAIT_MS / 1000
        exchange = read(session, {"after": after, "wait_ms": WAIT_MS}, timeout_s=timeout_s)
        answers.append((exchange, time.monotonic()))

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    time.sleep(0.5)
    submitted = session.a.submit(session.task("feed", session.config.params))
    accepted_at = time.monotonic()
    job = session.admitted("feed", submitted)
    poller.join(timeout=WAIT_MS / 1000 + session.config.request_timeout_s)
    with session.item("X2") as check:
        if job is None:
            check.skip(session.not_admitted(submitted, "the feed's Task"))
        check.expect(bool(answers), "the long-poll never answered")
        exchange, answered = answers[0]
        page = check.status(exchange, 200)
        firsts = [(e.get("job_id"), e.get("type")) for e in page.get("events", [])[:1]]
        check.expect(firsts == [(job.job_id, "job.accepted")], f"the long-poll answered {firsts}")
        late = answered - accepted_at
        check.expect(late < ANSWER_WITHIN_S, f"answered {late:.2f} s after the submission")
        check.note(f"answered {max(late, 0):.2f} s after the submission")


def follow(session: Session, after: str) -> None:
    """X1: every event of the run's jobs once, in each job's order; X3 named cursors; X4
    refused cursors (and another consumer's, with --token-b)."""
    mine = {job.job_id for job in session.jobs.values() if not job.name.startswith("b-")}
    theirs = {job.job_id for job in session.jobs.values() if job.name.startswith("b-")}
    streams = {job_id: _stream(session, job_id) for job_id in mine}
    time.sleep(SETTLE_S)
    end = after
    with session.item("X1") as check:
        events, end = _all_after(session, check, after)
        ids = [event.get("event_id") for event in events]
        check.expect(len(ids) == len(set(ids)), "an event showed twice")
        foreign = {str(event.get("job_id")) for event in events} & theirs
        check.expect(not foreign, f"A's feed shows B's jobs: {sorted(foreign)[:2]}")
        for job_id, stream in streams.items():
            shown = [event.get("event_id") for event in events if event.get("job_id") == job_id]
            check.expect(
                shown[: len(stream)] == stream,
                f"{job_id}: the feed shows {len(shown)} events, its stream {len(stream)}",
            )
        check.note(f"{len(events)} events of {len(mine)} jobs, each once, in each job's order")
    _named_cursor(session, after, end)
    _refused(session, after)


def _all_after(session: Session, check: Check, after: str) -> tuple[list[dict[str, Any]], str]:
    """The events after `after` to the end of the feed, and the cursor there."""
    events: list[dict[str, Any]] = []
    cursor = after
    for _ in range(CATCH_UP_PAGES):
        page = check.status(read(session, {"after": cursor, "limit": 200}), 200)
        events += page["events"]
        cursor = page["next_after"]
        if not page["has_more"]:
            return events, cursor
    raise Skipped("the feed did not end within the pages the kit reads")


def _stream(session: Session, job_id: str) -> list[str]:
    ids: list[str] = []
    after: str | None = None
    for _ in range(100):
        page = session.a.events(job_id, {"after": after} if after else None).document
        if not isinstance(page, dict):
            return ids
        ids += [event.get("event_id") for event in page.get("events", [])]
        after = page.get("next_after")
        if not after:
            return ids
    return ids


def _named_cursor(session: Session, after: str, end: str) -> None:
    name = f"conformance-{session.run_id}"
    with session.item("X3") as check:
        acked = check.status(_ack(session, name, after), 200)
        check.expect(acked.get("through") == after, f"the ack answered {acked.get('through')}")
        direct = check.status(read(session, {"after": after, "limit": 200}), 200)
        resumed = check.status(read(session, {"consumer": name, "limit": 200}), 200)
        # Jobs may still be writing events between the two reads, and a page may stop short of
        # its limit while more follow: both reads start at the same place, so the shorter is
        # the start of the longer, and neither is empty when the other is not.
        by_cursor = [e["event_id"] for e in direct["events"]]
        by_name = [e["event_id"] for e in resumed["events"]]
        shorter = min(len(by_cursor), len(by_name))
        check.expect(
            by_name[:shorter] == by_cursor[:shorter] and (shorter > 0 or not by_cursor),
            "?consumer= did not resume after the acked cursor",
        )
        if end == after:
            check.skip("no event of this run moved the feed's end (no Task was admitted)")
        moved = check.status(_ack(session, name, end), 200)
        check.expect(moved.get("through") == end, f"the ack answered {moved.get('through')}")
        back = check.status(_ack(session, name, after), 200)
        check.expect(back.get("through") == end, "an older cursor moved the named one back")
        check.note("ack moves it, ?consumer= resumes after it, an older cursor leaves it")


def _refused(session: Session, after: str) -> None:
    with session.item("X4") as check:
        check.error(read(session, {"after": _edited(after)}), 400, "invalid_params")
        check.error(read(session, {"limit": 0}), 400, "invalid_params")
        notes = ["an edited cursor and limit=0 → 400 invalid_params"]
        if session.b is not None:
            check.error(session.b.send("GET", "/events", query={"after": after}), 400)
            body = {"consumer": "x", "through": after}
            check.error(session.b.send("POST", "/events/ack", body=body), 400)
            notes.append("B reading or acking A's cursor → 400")
        check.note("; ".join(notes))


def _ack(session: Session, name: str, through: str) -> Exchange:
    return session.a.send("POST", "/events/ack", body={"consumer": name, "through": through})


def _edited(cursor: str) -> str:
    """The cursor with one character of what it carries changed (still well-formed text)."""
    try:
        raw = bytearray(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, binascii.Error):
        return cursor + "x"
    if not raw:
        return "x"
    raw[0] = raw[0] ^ 1
    return base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")
