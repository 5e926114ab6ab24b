"""The SDK reuses the capabilities document for its max-age, then revalidates it by ETag."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from jobstream_client import Client
from jobstream_client.caching import CapabilitiesCache, fresh_for_s
from jobstream_client.transport import Query, Response, Transport

DOCUMENT = {
    "protocol_versions": ["1"],
    "job_types": [{"name": "candidate_search", "features": ["events"]}],
    "server_time": 1,
}
ETAG = 'W/"0123456789abcdef0123456789abcdef"'
CACHEABLE = {"etag": ETAG, "cache-control": "private, max-age=60"}


class Scripted(Transport):
    """Answers from a script and records what each request carried."""

    def __init__(self, *answers: Response) -> None:
        super().__init__("https://jobs.example.test")
        self.answers = list(answers)
        self.sent: list[dict[str, str]] = []

    def send(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        self.sent.append(dict(headers or {}))
        return self.answers.pop(0)


def ok(headers: dict[str, str], document: dict[str, Any] = DOCUMENT) -> Response:
    return Response(200, headers, json.dumps(document).encode())


class Clock:
    now = 1_000.0

    def __call__(self) -> float:
        return self.now


def client(transport: Transport, clock: Clock, **options: Any) -> Client:
    return Client("https://jobs.example.test", "t", transport=transport, clock=clock, **options)


def test_a_fresh_document_is_reused_without_asking() -> None:
    transport, clock = Scripted(ok(CACHEABLE)), Clock()
    api = client(transport, clock)
    assert api.capabilities().supports("1")
    clock.now += 59
    assert api.capabilities().job_type("candidate_search") is not None
    assert len(transport.sent) == 1
    assert "If-None-Match" not in transport.sent[0]


def test_a_stale_document_is_revalidated_and_a_304_keeps_it() -> None:
    transport, clock = Scripted(ok(CACHEABLE), Response(304, CACHEABLE)), Clock()
    api = client(transport, clock)
    first = api.capabilities()
    clock.now += 60
    assert api.capabilities() == first
    assert transport.sent[1]["If-None-Match"] == ETAG
    # The 304 made it fresh for another max-age.
    clock.now += 59
    api.capabilities()
    assert len(transport.sent) == 2


def test_a_changed_document_replaces_the_stored_one() -> None:
    changed = {**DOCUMENT, "protocol_versions": ["1", "2"]}
    other = {"etag": 'W/"other"', "cache-control": "private, max-age=60"}
    transport, clock = Scripted(ok(CACHEABLE), ok(other, changed)), Clock()
    api = client(transport, clock)
    api.capabilities()
    clock.now += 61
    assert api.capabilities().supports("2")
    stored = api.capabilities_cache.get(api.base_url, "t")
    assert stored is not None
    assert stored.etag == 'W/"other"'


def test_fresh_clients_share_a_given_cache_but_never_across_tokens() -> None:
    cache, clock = CapabilitiesCache(), Clock()
    first = Scripted(ok(CACHEABLE))
    client(first, clock, capabilities_cache=cache).capabilities()
    second = Scripted()
    client(second, clock, capabilities_cache=cache).capabilities()
    assert second.sent == []
    other_tenant = Scripted(ok(CACHEABLE))
    Client(
        "https://jobs.example.test",
        "u",
        transport=other_tenant,
        clock=clock,
        capabilities_cache=cache,
    ).capabilities()
    assert len(other_tenant.sent) == 1
    assert "If-None-Match" not in other_tenant.sent[0]


def test_an_answer_without_etag_or_with_no_store_is_not_kept() -> None:
    for headers in (
        {"cache-control": "private, max-age=60"},
        {**CACHEABLE, "cache-control": "no-store"},
    ):
        transport, clock = Scripted(ok(headers), ok(headers)), Clock()
        api = client(transport, clock)
        api.capabilities()
        api.capabilities()
        assert len(transport.sent) == 2
        assert "If-None-Match" not in transport.sent[1]


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("private, max-age=60", 60.0),
        ("max-age=5", 5.0),
        ('Max-Age="7", private', 7.0),
        ("no-cache, max-age=60", 0.0),
        ("private", 0.0),
        (None, 0.0),
        ("no-store", None),
        ("s-maxage=60", 0.0),
    ],
)
def test_fresh_for_reads_max_age(value: str | None, seconds: float | None) -> None:
    assert fresh_for_s(value) == seconds
