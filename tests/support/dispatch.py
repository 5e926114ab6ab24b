"""What the dispatcher does after commits (DynamoDB Streams -> DispatcherFunction -> queues),
for in-process tests: the table's stream, read from moto through the template's event source
(its filter, batch size and partial batch responses), feeds the real handler.

Nothing hands a job or a callback to its queue inside a request any more; a test that reads the
queues after a commit calls `dispatch_stream` first, as Lambda would have run the dispatcher.
"""

from __future__ import annotations

import threading
from functools import cache
from typing import Any

import boto3

from jobstream import runtime as runtime_module
from jobstream.runtime import Runtime
from jobstream_local.gateway import load_handler
from jobstream_local.streams import StreamPoller
from jobstream_local.template import StreamSource, Template

# One reader per table's stream, kept where it stopped (tables are per test).
_pollers: dict[str, StreamPoller] = {}


@cache
def _source() -> StreamSource:
    (source,) = Template.load().stream_sources()
    return source


@cache
def _handler() -> Any:
    return load_handler(_source().function)


def _poller(table_name: str) -> StreamPoller:
    if table_name not in _pollers:
        arn = boto3.client("dynamodb").describe_table(TableName=table_name)["Table"][
            "LatestStreamArn"
        ]
        source = _source()
        _pollers[table_name] = StreamPoller(
            streams=boto3.client("dynamodbstreams"),
            stream_arn=arn,
            function_name=source.function.name,
            handler=_handler(),
            batch_size=source.batch_size,
            filters=source.filters,
            stopping=threading.Event(),
            starting_position=source.starting_position,
            max_retries=source.max_retries,
        )
    return _pollers[table_name]


def dispatch_stream(rt: Runtime) -> int:
    """Run the dispatcher (as `rt`) over every stream record written since the last call;
    returns how many records were read."""
    poller = _poller(rt.settings.table_name)
    previous = runtime_module.runtime
    runtime_module.runtime = lambda: rt  # type: ignore[assignment]
    try:
        return poller.drain()
    finally:
        runtime_module.runtime = previous  # type: ignore[assignment]
