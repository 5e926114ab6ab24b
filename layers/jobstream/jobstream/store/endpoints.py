"""Callback endpoints' health: one item per (tenant, origin), written only by conditional or
counting updates, so that SQS's duplicate messages and two workers seeing the same failure make
each transition once (service/endpoints.py decides; this module only writes what it is told).

    PK=ENDPOINT#<tenant>  SK=ORIGIN#<origin>  state, failures, failing_since, changed_at,
                                              next_probe_at, last_error
    sweep_pk=ENDPOINT#HELD  sweep_sk=<due>#<tenant>#<origin>  while paused (due: its next probe)
                                              or resumed with a backlog still to drain (due:
                                              its resume, then the sweep that drained it last)

No write here is part of a transaction (none can meet a TransactionConflict); throttling is
retried by the client (jobstream.retries), and a condition that fails is an answer, not an error.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from botocore.exceptions import ClientError

from jobstream.domain import Endpoint, EndpointHealth, EndpointState
from jobstream.store import keys
from jobstream.store.client import TableStore, error_code
from jobstream.store.codec import from_item, to_item

MAX_ERROR_CHARS: Final = 1000
_OPTIONAL: Final = ("failing_since", "changed_at", "next_probe_at", "last_error")


def _health(endpoint: Endpoint, item: Mapping[str, Any] | None) -> EndpointHealth:
    if not item:
        return EndpointHealth(endpoint)
    values = from_item(item)
    return EndpointHealth(
        endpoint,
        state=values.get("state", EndpointState.HEALTHY),
        failures=int(values.get("failures", 0)),
        **{name: values[name] for name in _OPTIONAL if name in values},
    )


class EndpointStore(TableStore):
    def _key(self, endpoint: Endpoint) -> dict[str, Any]:
        return to_item(
            {keys.PK: keys.endpoint_pk(endpoint.tenant), keys.SK: keys.endpoint_sk(endpoint.origin)}
        )

    def get(self, endpoint: Endpoint) -> EndpointHealth:
        """The endpoint's health (healthy when never written). Eventually consistent: every
        decision taken on it is made by a conditional write below."""
        response = self.client.get_item(
            TableName=self.table_name, Key=self._key(endpoint), ReturnConsumedCapacity="TOTAL"
        )
        return _health(endpoint, response.get("Item"))

    def of_tenant(self, tenant: str) -> list[EndpointHealth]:
        """Every endpoint of `tenant` the store has written, by origin."""
        found: list[EndpointHealth] = []
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": to_item({":pk": keys.endpoint_pk(tenant)}),
            "ConsistentRead": True,
            "ReturnConsumedCapacity": "TOTAL",
        }
        while True:
            response = self.client.query(**request)
            for item in response.get("Items", []):
                origin = keys.origin_of(item[keys.SK]["S"])
                found.append(_health(Endpoint(tenant, origin), item))
            if "LastEvaluatedKey" not in response:
                return found
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    def _update(
        self,
        endpoint: Endpoint,
        update: str,
        values: Mapping[str, Any],
        condition: str | None = None,
    ) -> EndpointHealth | None:
        """One update; None when its condition did not hold (nothing written)."""
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "Key": self._key(endpoint),
            "UpdateExpression": update,
            "ExpressionAttributeNames": {"#state": "state"},
            "ExpressionAttributeValues": to_item(values),
            "ReturnValues": "ALL_NEW",
            "ReturnConsumedCapacity": "TOTAL",
        }
        if condition is not None:
            request["ConditionExpression"] = condition
        try:
            response = self.client.update_item(**request)
        except ClientError as error:
            if error_code(error) == "ConditionalCheckFailedException":
                return None
            raise
        return _health(endpoint, response["Attributes"])

    def record_failure(self, endpoint: Endpoint, *, now: int, error: str) -> EndpointHealth:
        """One more failed attempt in the endpoint's run (a counter: every attempt counts once,
        and an attempt is made once, under its callback's conditional claim)."""
        health = self._update(
            endpoint,
            "SET failures = if_not_exists(failures, :zero) + :one, "
            "failing_since = if_not_exists(failing_since, :now), last_error = :error, "
            "#state = if_not_exists(#state, :healthy)",
            {
                ":zero": 0,
                ":one": 1,
                ":now": now,
                ":error": error[:MAX_ERROR_CHARS],
                ":healthy": EndpointState.HEALTHY,
            },
        )
        if health is None:  # pragma: no cover - the update has no condition
            raise RuntimeError("an unconditional update reported a failed condition")
        return health

    def record_success(self, endpoint: Endpoint) -> bool:
        """End the run of failures of a healthy endpoint; False when there was none."""
        return (
            self._update(
                endpoint,
                "SET failures = :zero REMOVE failing_since",
                {":zero": 0, ":healthy": EndpointState.HEALTHY},
                # Only a healthy endpoint's run ends here: a paused one resumes (and says so).
                "#state = :healthy AND failures > :zero",
            )
            is not None
        )

    def pause(
        self, endpoint: Endpoint, *, now: int, failures: int, failing_before: int, probe_at: int
    ) -> bool:
        """healthy -> paused; True for the one writer that made the move."""
        return (
            self._update(
                endpoint,
                "SET #state = :paused, changed_at = :now, next_probe_at = :probe, "
                "sweep_pk = :held, sweep_sk = :due",
                {
                    ":paused": EndpointState.PAUSED,
                    ":healthy": EndpointState.HEALTHY,
                    ":now": now,
                    ":probe": probe_at,
                    ":held": keys.HELD_ENDPOINTS,
                    ":due": keys.held_sk(probe_at, endpoint.tenant, endpoint.origin),
                    ":failures": failures,
                    ":since": failing_before,
                },
                # The rule holds on the stored run (not on a stale read), and of two workers
                # whose failures both cross it only one pauses (and notifies).
                "#state = :healthy AND failures >= :failures AND failing_since <= :since",
            )
            is not None
        )

    def take_probe(self, endpoint: Endpoint, *, now: int, next_probe_at: int) -> bool:
        """Take a paused endpoint's probe; True for the one attempt that may go now."""
        return (
            self._update(
                endpoint,
                "SET next_probe_at = :next, sweep_sk = :due",
                {
                    ":paused": EndpointState.PAUSED,
                    ":now": now,
                    ":next": next_probe_at,
                    ":due": keys.held_sk(next_probe_at, endpoint.tenant, endpoint.origin),
                },
                # One probe an interval however many workers find it due at once.
                "#state = :paused AND next_probe_at <= :now",
            )
            is not None
        )

    def resume(self, endpoint: Endpoint, *, now: int, was: EndpointState) -> bool:
        """paused (a probe went through) or disabled (re-enabled) -> healthy, with its backlog
        due for the sweep's drain at once; True for the one writer that made the move."""
        return (
            self._update(
                endpoint,
                "SET #state = :healthy, failures = :zero, changed_at = :now, "
                "sweep_pk = :held, sweep_sk = :due REMOVE failing_since, next_probe_at",
                {
                    ":healthy": EndpointState.HEALTHY,
                    ":was": was,
                    ":zero": 0,
                    ":now": now,
                    ":held": keys.HELD_ENDPOINTS,
                    ":due": keys.held_sk(now, endpoint.tenant, endpoint.origin),
                },
                # Only from the state the caller saw: one resume (and one notice) per pause.
                "#state = :was",
            )
            is not None
        )

    def disable(self, endpoint: Endpoint, *, now: int, error: str) -> bool:
        """-> disabled (the receiver said 410 Gone); True for the one writer that made it."""
        return (
            self._update(
                endpoint,
                "SET #state = :disabled, changed_at = :now, last_error = :error "
                "REMOVE next_probe_at, sweep_pk, sweep_sk",
                {
                    ":disabled": EndpointState.DISABLED,
                    ":now": now,
                    ":error": error[:MAX_ERROR_CHARS],
                },
                # A second 410 (or a duplicate) is no new transition and tells nobody again.
                "attribute_not_exists(#state) OR #state <> :disabled",
            )
            is not None
        )

    def settle(self, endpoint: Endpoint, *, settled_before: int) -> bool:
        """A resumed endpoint whose backlog is drained leaves the sweep's list."""
        return (
            self._update(
                endpoint,
                "REMOVE sweep_pk, sweep_sk",
                {":healthy": EndpointState.HEALTHY, ":before": settled_before},
                # Still healthy (not paused again meanwhile), and resumed long enough ago that
                # every callback parked before the resume shows in the (eventually consistent)
                # index the drain read.
                "#state = :healthy AND changed_at <= :before",
            )
            is not None
        )

    def requeue(self, endpoint: Endpoint, *, due: int) -> bool:
        """A resumed endpoint whose backlog outlasted its sweep's share goes to the back of the
        held list (due at `due`); False when it is no longer a held, resumed endpoint."""
        return (
            self._update(
                endpoint,
                "SET sweep_sk = :due",
                {
                    ":healthy": EndpointState.HEALTHY,
                    ":held": keys.HELD_ENDPOINTS,
                    ":due": keys.held_sk(due, endpoint.tenant, endpoint.origin),
                },
                # Only a resumed one still on the list: a paused one's place is its next probe,
                # and a settled one (its backlog drained meanwhile) stays off the list.
                "#state = :healthy AND sweep_pk = :held",
            )
            is not None
        )

    def held(self, *, now: int) -> Iterator[Endpoint]:
        """Endpoints the sweep should look at now (a probe due, a backlog to drain)."""
        request: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": keys.SWEEP_INDEX,
            "KeyConditionExpression": "sweep_pk = :p AND sweep_sk < :before",
            "ExpressionAttributeValues": to_item(
                {":p": keys.HELD_ENDPOINTS, ":before": keys.sweep_due_bound(now)}
            ),
            "ReturnConsumedCapacity": "TOTAL",
        }
        while True:
            response = self.client.query(**request)
            for item in response.get("Items", []):
                yield Endpoint(*keys.held_of(item["sweep_sk"]["S"]))
            if "LastEvaluatedKey" not in response:
                return
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
