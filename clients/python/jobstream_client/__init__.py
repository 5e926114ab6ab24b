"""jobstream_client: a typed consumer of any Workflow Protocol v1 producer (standard library only).

from jobstream_client import Client, new_task

client = Client("https://jobs.example.com", token)
submission = client.submit(new_task("candidate_search", {"target_id": "demo"}))
for event in client.follow(submission.job.job_id):
    handle(event)  # acked once handled; a restarted consumer resumes after the last ack
"""

from __future__ import annotations

from jobstream_client.caching import CapabilitiesCache
from jobstream_client.client import Client, FollowTimeoutError
from jobstream_client.errors import (
    ApiError,
    AuthError,
    BadRequestError,
    ConflictError,
    IdempotencyConflictError,
    JobstreamError,
    NotFoundError,
    ResponseError,
    ServerError,
    TransportError,
)
from jobstream_client.models import (
    PROTOCOL_VERSION,
    TERMINAL_EVENT_TYPES,
    TERMINAL_STATUSES,
    AckResult,
    Capabilities,
    Delivery,
    ErrorInfo,
    Event,
    EventPage,
    FeedAck,
    FeedPage,
    Job,
    JobPage,
    JobType,
    Progress,
    Submission,
    Task,
    new_task,
)
from jobstream_client.retry import RetryPolicy
from jobstream_client.webhooks import CallbackVerificationError, sign, verify_callback

__version__ = "0.1.0"

__all__ = [
    "PROTOCOL_VERSION",
    "TERMINAL_EVENT_TYPES",
    "TERMINAL_STATUSES",
    "AckResult",
    "ApiError",
    "AuthError",
    "BadRequestError",
    "CallbackVerificationError",
    "Capabilities",
    "CapabilitiesCache",
    "Client",
    "ConflictError",
    "Delivery",
    "ErrorInfo",
    "Event",
    "EventPage",
    "FeedAck",
    "FeedPage",
    "FollowTimeoutError",
    "IdempotencyConflictError",
    "Job",
    "JobPage",
    "JobType",
    "JobstreamError",
    "NotFoundError",
    "Progress",
    "ResponseError",
    "RetryPolicy",
    "ServerError",
    "Submission",
    "Task",
    "TransportError",
    "new_task",
    "sign",
    "verify_callback",
]
