"""jobstream_conformance: a black-box conformance suite for any Workflow Protocol v1 producer.

It speaks only HTTP (through jobstream_client's transport), validates every document it is
answered against the protocol's published schema (a verified copy ships in this package), and
reports each item of the reference producer's checklist and the consumer's requirements as
pass, fail, skip (not observable in this run, with the reason) or n/a (needs the producer's
internals, with the reason).

    from jobstream_conformance import Config, run
    verdicts = run(Config(url="https://jobs.example.com", token="..."))
"""

from __future__ import annotations

from jobstream_conformance.catalogue import ITEMS, Outcome
from jobstream_conformance.report import as_json, failed, table
from jobstream_conformance.runner import UnreachableError, run
from jobstream_conformance.session import Config, Verdict

__all__ = [
    "ITEMS",
    "Config",
    "Outcome",
    "UnreachableError",
    "Verdict",
    "as_json",
    "failed",
    "run",
    "table",
]
