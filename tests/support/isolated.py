"""A runtime on a table and queues of its own, for the tests that run many worlds within one
test's fixtures (Hypothesis examples, fault matrices)."""

from __future__ import annotations

import uuid
from dataclasses import replace
from functools import cache

import boto3

from jobstream.runtime import Runtime
from jobstream.store.jobs import JobStore
from jobstream.store.sweep_index import record_legacy_shards_retired
from jobstream_local.resources import create_queues, create_tables
from jobstream_local.template import Template


@cache
def _template() -> Template:
    return Template.load()


def on_own_table_and_queues(base: Runtime, prefix: str) -> Runtime:
    """`base` on a new table (`prefix`-<random>) and new queues: work, callbacks and the
    callbacks' dead letters."""
    suffix = uuid.uuid4().hex[:10]
    table = f"{prefix}-{suffix}"
    dynamodb = boto3.client("dynamodb")
    create_tables(_template(), dynamodb, name_for=lambda _: table)
    record_legacy_shards_retired(dynamodb, table, now=0)
    queues = create_queues(
        _template(), boto3.client("sqs"), name_for=lambda name: f"{name}-{suffix}"
    )
    settings = base.settings.model_copy(
        update={
            "table_name": table,
            "work_queue_url": queues["WorkQueue"]["Ref"],
            "callback_queue_url": queues["CallbackQueue"]["Ref"],
            "callback_dead_letter_url": queues["CallbackDeadLetterQueue"]["Ref"],
        }
    )
    return replace(base, settings=settings, store=JobStore(table))
