"""Every assumption the bill rests on, in one place: list prices (dated), what the bench cannot
measure here (AWS's own latencies, Lambda's CPU share, the platform's log lines), and the
traffic the bill is priced at. Everything else in the bill is measured (bench.cost,
bench.invocations, bench.cold_start) or read from template.yaml.
"""

from __future__ import annotations

from typing import Final

# List prices, us-east-1, on-demand, as AWS publishes them; dated so that a reader can check.
PRICES_AS_OF: Final = "2026-12-03"
WRITE_UNIT: Final = "DynamoDB write request unit"
READ_UNIT: Final = "DynamoDB read request unit"
SQS_REQUEST: Final = "SQS request (standard, per 64 KB chunk)"
LAMBDA_REQUEST: Final = "Lambda request"
HTTP_API_REQUEST: Final = "HTTP API request"
SECRETS_CALL: Final = "Secrets Manager API call"
PRICE_PER_MILLION: Final[dict[str, float]] = {
    WRITE_UNIT: 0.625,
    READ_UNIT: 0.125,
    SQS_REQUEST: 0.40,
    LAMBDA_REQUEST: 0.20,
    HTTP_API_REQUEST: 1.00,
    SECRETS_CALL: 5.00,  # $0.05 per 10,000
}
# Lambda compute, arm64 (the template's architecture), per GB-second; the INIT phase of a
# managed runtime is billed at the same rate (since August 2025).
LAMBDA_GB_SECOND: Final = 0.0000133334
CLOUDWATCH_LOGS_INGESTED_GB: Final = 0.50
CLOUDWATCH_LOGS_STORED_GB_MONTH: Final = 0.03
DYNAMODB_STORED_GB_MONTH: Final = 0.25  # standard table class
DYNAMODB_PITR_GB_MONTH: Final = 0.20  # continuous backups, on the table's size
EGRESS_GB: Final = 0.09  # data transfer out to the internet, past the free 100 GB a month
SECRET_MONTH: Final = 0.40
ALARM_MONTH: Final = 0.10  # per metric a standard-resolution alarm reads
CUSTOM_METRIC_MONTH: Final = 0.30  # the first 10,000 custom metrics
DASHBOARD_MONTH: Final = 3.00  # past the account's 3 free dashboards
GB: Final = 1024**3

# What the bench cannot measure here.
# One AWS call's round trip as a Lambda function waits for it (DynamoDB and SQS in the same
# region, the client's own work on the request and the response included).
AWS_CALL_S: Final = 0.012
# The consumer's receiver answering a callback POST (its own time, over the internet).
CALLBACK_RECEIVER_S: Final = 0.100
# Lambda gives a function CPU in proportion to its memory: one vCPU at 1,769 MB. Compute
# measured here on one core is scaled by 1,769 / memory below that (this machine's core taken
# as a Graviton core's equal).
FULL_VCPU_MB: Final = 1769
# Lambda's own lines per invocation in the JSON log format (the template's): its start and its
# report (a cold start's report also names its INIT), as they read in CloudWatch. Kept only when
# the template's PlatformLogLevel is INFO or DEBUG; WARN leaves them out.
PLATFORM_LOG_LINES: Final = (
    (
        '{"time":"2026-12-04T15:22:57.291Z","type":"platform.start","record":'
        '{"requestId":"0f4a3c2e-7b1d-4e59-9a6c-3d2b1e0f8a7c","version":"$LATEST"}}'
    ),
    (
        '{"time":"2026-12-04T15:22:57.342Z","type":"platform.report","record":'
        '{"requestId":"0f4a3c2e-7b1d-4e59-9a6c-3d2b1e0f8a7c","metrics":{"durationMs":48.113,'
        '"billedDurationMs":49,"memorySizeMB":512,"maxMemoryUsedMB":83},"status":"success"}}'
    ),
)
PLATFORM_LOG_BYTES: Final = sum(len(line.encode("utf-8")) for line in PLATFORM_LOG_LINES)
PLATFORM_LOG_EVENTS: Final = len(PLATFORM_LOG_LINES)
PLATFORM_LOG_KEPT_AT: Final = frozenset({"INFO", "DEBUG"})
# A JSON line of the function's without a timestamp (the EMF documents): Lambda may add one.
# Counted on every such line, an upper bound.
ADDED_TIMESTAMP_BYTES: Final = len(',"timestamp":"2026-12-04T15:22:57.291Z"')
# CloudWatch Logs bills each event's bytes plus 26 bytes.
LOG_EVENT_OVERHEAD_BYTES: Final = 26
# Stored logs: about this share of the ingested bytes (compressed), for the template's retention.
LOG_STORED_SHARE: Final = 0.15
# An HTTP response's or a callback request's status line and headers (egress beside the body).
HTTP_HEADER_BYTES: Final = 400
# DynamoDB bills 100 bytes of overhead per stored item and per index entry.
ITEM_OVERHEAD_BYTES: Final = 100

# The traffic the bill is priced at.
JOBS_PER_MONTH: Final = 1_000_000
SECONDS_PER_MONTH: Final = 30 * 24 * 3600
# At 1M jobs a month (0.39 a second, each invocation well under a second) every function keeps
# about one warm environment; Lambda recycles an environment after some hours even when busy
# (undocumented; taken as 2 h), each recycle one cold start.
WARM_ENVIRONMENTS: Final = 1
ENVIRONMENT_LIFETIME_S: Final = 2 * 3600
