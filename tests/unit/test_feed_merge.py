"""The feed's merge of its shards (store/feed.py): followed from the start with any page size,
every entry once, in one order, however the entries fall on the shards."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from jobstream.store import keys
from jobstream.store.feed import FeedStore

TENANT = "acme"
JOB_IDS = [f"job_{str(n).zfill(32)}" for n in range(12)]


class ShardedIndex:
    """The `feed` index's query as DynamoDB answers it: one partition, a key range, ascending,
    at most `Limit` items, `LastEvaluatedKey` when it stopped short."""

    def __init__(self, positions: list[str]) -> None:
        self.partitions: dict[str, list[str]] = {}
        for position in positions:
            job_id = position.split("#")[1]
            self.partitions.setdefault(keys.feed_pk(TENANT, job_id), []).append(position)

    def query(self, **request: Any) -> dict[str, Any]:
        values = request["ExpressionAttributeValues"]
        partition, low, high = (values[name]["S"] for name in (":pk", ":low", ":high"))
        found = sorted(p for p in self.partitions.get(partition, []) if low <= p <= high)
        taken = found[: request["Limit"]]
        items = [
            {"feed_sk": {"S": p}, "kind": {"S": "job.accepted"}, "at": {"N": p[:13].lstrip("0")}}
            for p in taken
        ]
        answer: dict[str, Any] = {"Items": items}
        if len(found) > len(taken):
            answer["LastEvaluatedKey"] = {"feed_sk": {"S": taken[-1]}}
        return answer


positions = st.lists(
    st.builds(
        keys.feed_sk,
        st.integers(min_value=1, max_value=40),
        st.sampled_from(JOB_IDS),
        st.integers(min_value=1, max_value=5),
    ),
    unique=True,
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(positions, st.integers(min_value=1, max_value=25))
def test_following_the_feed_shows_every_entry_once_in_order(written: list[str], limit: int) -> None:
    index = ShardedIndex(written)
    feed = FeedStore("jobs", lambda: index)  # type: ignore[arg-type, return-value]
    shown: list[str] = []
    after: str | None = None
    for _ in range(len(written) + 2):
        page = feed.entries_after(TENANT, after, horizon=10**12, limit=limit)
        assert len(page.entries) <= limit
        shown += [entry.position for entry in page.entries]
        if page.entries:
            after = page.entries[-1].position
        if not page.more:
            break
        assert page.entries, "a page said more follow but showed none"
    assert shown == sorted(written)


@given(positions, st.integers(min_value=1, max_value=40))
def test_nothing_past_the_horizon_is_shown(written: list[str], horizon: int) -> None:
    feed = FeedStore("jobs", lambda: ShardedIndex(written))  # type: ignore[arg-type, return-value]
    page = feed.entries_after(TENANT, None, horizon=horizon, limit=200)
    assert [entry.position for entry in page.entries] == sorted(
        p for p in written if int(p[:13]) <= horizon
    )
