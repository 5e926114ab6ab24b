"""The push channel, when the kit can listen where the producer can reach it: every event
POSTed as a valid Event, signed and authenticated as configured; a receiver that refuses
everything changes nothing; pushing acknowledges nothing."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from jobstream_client import CallbackVerificationError, verify_callback
from jobstream_conformance.catalogue import Outcome
from jobstream_conformance.schema import protocol
from jobstream_conformance.session import Job, Session

PUSH = ("R43", "R44", "C22")
ACCEPT, REFUSE = "/conformance/accept", "/conformance/refuse"


@dataclass
class Posted:
    path: str
    headers: dict[str, str]
    body: bytes
    at_s: float


@dataclass
class Receiver:
    url: str
    posted: list[Posted] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def received(self, path: str) -> list[Posted]:
        with self.lock:
            return [post for post in self.posted if post.path == path]


@contextmanager
def receiver(listen: str, public_url: str | None) -> Iterator[Receiver]:
    """Answers 204 on ACCEPT and 404 (permanent) on REFUSE, recording every POST. Not 410: a
    producer may take 410 Gone for the whole endpoint and hold back ACCEPT's callbacks too
    (they share an origin), as jobstream's endpoint health does."""
    state = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with state.lock:
                state.posted.append(
                    Posted(self.path, dict(self.headers.items()), body, time.time())
                )
            self.send_response(404 if self.path == REFUSE else 204)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_args: object) -> None:
            return

    host, _, port = listen.rpartition(":")
    server = ThreadingHTTPServer((host or "127.0.0.1", int(port or 0)), Handler)
    bound_host, bound_port = server.server_address[:2]
    state.url = (public_url or f"http://{bound_host!s}:{bound_port}").rstrip("/")
    thread = threading.Thread(target=server.serve_forever, args=(0.1,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def callbacks(session: Session) -> None:
    config = session.config
    if config.receiver is None:
        session.skip(
            "give --callback-receiver HOST:PORT (an address the producer can reach)", *PUSH
        )
        pull_without_callback(session, None)
        return
    with receiver(config.receiver, config.receiver_url) as hooks:
        accepted = _submit(session, "push", hooks.url + ACCEPT)
        refused = _submit(session, "push-refused", hooks.url + REFUSE)
        if accepted is None:
            session.skip("the Task with a callback_url was not admitted", *PUSH)
        else:
            _push(session, hooks, accepted)
        pull_without_callback(session, refused)


def _submit(session: Session, name: str, url: str) -> Job | None:
    exchange = session.a.submit(session.task(name, session.config.params, callback_url=url))
    with session.item("C6") as check:
        check.status(exchange, 202)
        check.note(f"callback_url {url} accepted")
    job = session.admitted(name, exchange)
    if job is not None:
        session.wait(job)
    return job


def _pulled(session: Session, job: Job) -> list[dict[str, Any]]:
    page = session.a.events(job.job_id).document
    return list(page.get("events") or []) if isinstance(page, dict) else []


def _push(session: Session, hooks: Receiver, job: Job) -> None:
    pulled = _pulled(session, job)
    wanted = {event["event_id"] for event in pulled}
    deadline = time.monotonic() + min(session.config.timeout_s, 60)
    while time.monotonic() < deadline:
        documents = [_json(post.body) for post in hooks.received(ACCEPT)]
        if wanted <= {d.get("event_id") for d in documents if isinstance(d, dict)}:
            break
        time.sleep(session.config.poll_s)
    posts = hooks.received(ACCEPT)
    documents = [_json(post.body) for post in posts]
    with session.item("R43") as check:
        for document in documents:
            problems = protocol().errors(document, "Event")
            check.expect(not problems, f"a callback body is not an Event: {problems[:1]}")
            session.callback_events.append(document)
        pushed = {d["event_id"]: d for d in documents}
        missing = wanted - set(pushed)
        check.expect(
            not missing, f"{len(missing)} of {len(wanted)} events never POSTed within the wait"
        )
        for event in pulled:
            check.expect(
                pushed[event["event_id"]]["type"] == event["type"],
                "a POSTed event differs from the pulled one",
            )
        check.note(f"{len(posts)} POSTs carried all {len(wanted)} events, each a valid Event")
    with session.item("R44") as check:
        page = check.status(session.a.events(job.job_id), 200)
        check.expect(
            page["unacked"] == len(pulled), f"unacked {page['unacked']} after delivered callbacks"
        )
        check.note(f"after {len(posts)} delivered callbacks unacked is still {page['unacked']}")
    with session.item("C22") as check:
        check.expect(bool(posts), "no callback arrived")
        config = session.config
        for post in posts:
            headers = {name.lower(): value for name, value in post.headers.items()}
            check.expect(
                headers.get("content-type", "").startswith("application/json"),
                "Content-Type is not JSON",
            )
            check.expect(
                headers.get("authorization", "").startswith("Bearer "),
                "a callback carries no bearer token (the consumer's ingress needs one)",
            )
            if config.callback_secrets or config.callback_token:
                try:
                    verify_callback(
                        headers,
                        post.body,
                        list(config.callback_secrets) or None,
                        token=config.callback_token,
                        now_s=post.at_s,
                    )
                except CallbackVerificationError as refused:
                    check.expect(False, f"a callback does not verify: {refused.reason}: {refused}")
        verified = [
            name
            for name, given in (
                ("signature", config.callback_secrets),
                ("token", config.callback_token),
            )
            if given
        ]
        check.note(
            f"{len(posts)} POSTs: JSON, a bearer token"
            + (f"; verified: {' and '.join(verified)}" if verified else "")
        )
    with session.item("C20") as check:
        check.expect(
            {d["event_id"] for d in documents} <= wanted,
            "a callback carried an id the pull stream lacks",
        )
        check.note("callback event ids are the pull stream's")


def pull_without_callback(session: Session, refused: Job | None) -> None:
    with session.item("C23") as check:
        main = session.jobs.get("main")
        if main is None:
            # R8 says why: its failure, or its skip (for want of --params).
            admission = session.verdicts["R8"]
            failed = admission.outcome is Outcome.FAIL
            check.skip("the main Task was not admitted (R8)" if failed else admission.evidence[0])
        check.expect(
            main.status in {"succeeded", "failed", "cancelled", "expired"},
            "the main job (no callback_url) did not finish",
        )
        check.note("a job without callback_url finished and its stream is pullable (R50)")
        if refused is not None:
            check.expect(
                refused.status in {"succeeded", "failed", "cancelled", "expired"},
                f"with a refusing receiver the job is {refused.status}",
            )
            events = _pulled(session, refused)
            check.expect(
                bool(events) and events[-1]["type"] == f"job.{refused.status}",
                "the stream lacks its terminal event",
            )
            check.note(
                f"a receiver answering 404 to every POST: the job still {refused.status}, "
                "stream complete"
            )


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None
