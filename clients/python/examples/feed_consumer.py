"""A consumer shaped like TelePost that runs entirely on the tenant's feed: no callback URL, no
poll per job. It submits its Tasks, then follows one stream of every job's events under a named
cursor, and settles each job on its terminal event.

    JOBSTREAM_URL=http://127.0.0.1:8000 JOBSTREAM_TOKEN=local-dev-token \\
        python examples/feed_consumer.py --name telepost --target-id demo-illustration --jobs 3

Restarted, it carries on after the last page it finished (the producer keeps the cursor under
`--name`): nothing is missed, and an event seen again is recognised by its `event_id`.
Each settled job is printed as one line: `<job_id> <status> <what it found>`.
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from collections.abc import Iterable

from jobstream_client import Client, Event, new_task


def settle(events: Iterable[Event], waiting_for: set[str]) -> dict[str, str]:
    """Each awaited job's outcome, from its terminal event, until none is awaited (events of
    other jobs of the tenant, and repeats, are passed over)."""
    settled: dict[str, str] = {}
    seen: set[str] = set()
    for event in events:
        if event.event_id in seen or event.job_id not in waiting_for:
            continue
        seen.add(event.event_id)
        if not event.terminal:
            continue
        job = event.raw.get("payload", {}).get("job", {})
        result = job.get("result") or {}
        found = f"{len(result.get('candidates', []))} candidates" if result else job.get("error")
        settled[event.job_id] = f"{job.get('status')} {found}"
        print(event.job_id, settled[event.job_id], flush=True)
        if settled.keys() >= waiting_for:
            break
    return settled


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="feed-consumer", help="the named cursor to resume")
    parser.add_argument("--target-id", required=True)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--idle-timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    client = Client(os.environ["JOBSTREAM_URL"], os.environ["JOBSTREAM_TOKEN"])
    if client.capabilities().extension("event_feed") is None:
        print("this producer serves no event feed", file=sys.stderr)
        return 2
    batch = uuid.uuid4().hex[:8]
    submitted = {
        client.submit(
            new_task(
                "candidate_search", {"target_id": args.target_id}, idempotency_key=f"{batch}-{n}"
            )
        ).job.job_id
        for n in range(args.jobs)
    }
    settled = settle(client.feed(args.name, idle_timeout_s=args.idle_timeout), submitted)
    return 0 if settled.keys() >= submitted else 1


if __name__ == "__main__":
    sys.exit(main())
