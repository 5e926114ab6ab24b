"""Everything the local stack, the tests and the benchmarks change in moto, in one call."""

from __future__ import annotations

from jobstream_local.moto_atomic import make_dynamodb_atomic
from jobstream_local.moto_expressions import make_expressions_cheap
from jobstream_local.moto_fair_queues import make_standard_queues_fair
from jobstream_local.moto_limits import enforce_item_limits
from jobstream_local.moto_move_task import add_message_move_tasks
from jobstream_local.moto_names import refuse_empty_attribute_names
from jobstream_local.moto_queries import make_queries_cheap
from jobstream_local.moto_responses import make_responses_cheap
from jobstream_local.moto_secrets import follow_the_current_label
from jobstream_local.moto_sqs import make_sqs_cheap
from jobstream_local.moto_streams import make_streams_bounded


def patch_moto() -> None:
    """Atomic DynamoDB requests and transactions, refused empty attribute names, and item sizes
    and numbers checked by DynamoDB's rules (as on AWS); DynamoDB queries and SQS requests whose
    cost does not grow with the whole table or queue, update expressions parsed once and items
    answered without a walk of their shape; table streams whose memory does not grow with their
    age; SQS message move tasks (a redrive of a dead-letter queue), which moto lacks; standard
    queues that serve their message groups in turn, as SQS fair queues do; and a secret's
    unlabelled read answering the version AWSCURRENT was moved to."""
    make_dynamodb_atomic()
    refuse_empty_attribute_names()
    enforce_item_limits()
    make_queries_cheap()
    make_expressions_cheap()
    make_responses_cheap()
    make_sqs_cheap()
    make_streams_bounded()
    add_message_move_tasks()
    make_standard_queues_fair()
    follow_the_current_label()
