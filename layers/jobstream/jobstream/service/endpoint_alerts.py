"""Announcing an endpoint's transition (paused, resumed, disabled): a structured log line, an
EMF metric with the tenant as its dimension, a notice to the tenant's `alert_url` (signed like
its callbacks) and one to the operator's SNS topic. Called once per transition: the conditional
write that made it (store/endpoints.py) has one winner.

The log line and the metric are the record. The two notices are sent once each, at the
transition: one that fails is logged and counted (`endpoint_alerts_failed`), not retried (the
endpoint's state, `jobstream tenants endpoints`, says the same at any time).
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Final

from jobstream import observability
from jobstream.config.settings import ConfigurationError
from jobstream.deadline import request_deadline
from jobstream.delivery.signing import signed_post_headers
from jobstream.domain import Endpoint
from jobstream.outbound.guard import check_at_delivery
from jobstream.runtime import Runtime

logger = logging.getLogger(__name__)

# How long a notice to the tenant may take, and what the invocation keeps after it (the
# attempt that made the transition still records its outcome).
ALERT_TIMEOUT_MS: Final = 5_000
ALERT_RESERVE_MS: Final = 5_000


class Transition(StrEnum):
    PAUSED = "paused"
    RESUMED = "resumed"
    DISABLED = "disabled"


# A resume is good news; a pause or a disable needs someone's attention.
_LEVELS: dict[Transition, int] = {
    Transition.PAUSED: logging.WARNING,
    Transition.RESUMED: logging.INFO,
    Transition.DISABLED: logging.WARNING,
}


def announce(
    rt: Runtime, transition: Transition, endpoint: Endpoint, *, now: int, reason: str
) -> None:
    """Log, count and notify one transition."""
    notice = {
        "type": f"endpoint.{transition.value}",
        "tenant": endpoint.tenant,
        "origin": endpoint.origin,
        "at": datetime.fromtimestamp(now / 1000, tz=UTC).isoformat(timespec="milliseconds"),
        "reason": reason,
    }
    logger.log(
        _LEVELS[transition], "callback endpoint %s", transition.value, extra={"endpoint": notice}
    )
    _count(transition, endpoint.tenant)
    for tell in (_tell_tenant, _tell_operator):
        try:
            tell(rt, notice, now)
        except Exception:
            logger.warning("%s could not be sent", tell.__name__.removeprefix("_"), exc_info=True)
            observability.count("endpoint_alerts_failed")


def _count(transition: Transition, tenant: str) -> None:
    # Each metric by its name (the docs' test finds every metric where it is counted).
    if transition is Transition.PAUSED:
        observability.count("endpoints_paused", dimension=tenant)
    elif transition is Transition.RESUMED:
        observability.count("endpoints_resumed", dimension=tenant)
    else:
        observability.count("endpoints_disabled", dimension=tenant)


def _tell_operator(rt: Runtime, notice: dict[str, Any], _now: int) -> None:
    subject = f"jobstream: {notice['tenant']} callback endpoint {notice['type'].split('.')[1]}"
    rt.alert_topic.publish(subject, notice)


def _tell_tenant(rt: Runtime, notice: dict[str, Any], now: int) -> None:
    try:
        tenant = rt.tenant(notice["tenant"])
    except ConfigurationError:
        tenant = None  # the registry cannot be read now: the operator's notice still goes
    if tenant is None or tenant.alert_url is None:
        return
    body = json.dumps(notice, separators=(",", ":"))
    # One id per transition: a receiver that sees it twice (it never should) can tell.
    message_id = f"endpoint-alert:{notice['tenant']}:{notice['origin']}:{notice['type']}:{now}"
    headers = signed_post_headers(
        message_id=message_id,
        timestamp=now // 1000,
        body=body,
        secrets=tenant.signing_keys(now),
        bearer=tenant.callback_token,
    )
    deadline = request_deadline(ALERT_TIMEOUT_MS, reserve_ms=ALERT_RESERVE_MS)
    # The same origins and pinning as its callbacks: an alert URL is no way around them.
    target = check_at_delivery(
        tenant.alert_url, tenant.origins, resolver=rt.resolver, deadline=deadline
    )
    response = rt.poster(target, body.encode("utf-8"), headers, deadline.remaining_s())
    if not 200 <= response.status < 300:
        raise RuntimeError(f"the tenant's alert_url answered HTTP {response.status}")
