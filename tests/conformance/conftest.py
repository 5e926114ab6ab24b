"""Stacks shared by the whole conformance suite: one of each, on the one xdist worker that runs
the suite (its modules are one `xdist_group`), stopped when the suite is done, not when the
session is (an idle stack still polls its queues and stream)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conformance._support import (
    CALLBACK_TOKEN,
    MAIN_TARGETS,
    MULTI_TARGETS,
    Client,
    Stack,
    start_stack,
)
from tests.support.receiver import Receiver, receiver


@pytest.fixture(scope="package")
def stacks(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Stack]]:
    """Both stacks, started and stopped in parallel (stopping waits for in-flight work).

    main: the reference harness target only; fast callback retries, a consumer-issued token.
    multi: v1.1, four enabled targets, the first one slow; a 1 s heartbeat so a cancelled
    job's worker notices quickly and frees its slot.
    """
    main_dir = tmp_path_factory.mktemp("main-stack")
    multi_dir = tmp_path_factory.mktemp("multi-stack")
    with ThreadPoolExecutor(max_workers=2) as pool:
        main = pool.submit(
            start_stack,
            main_dir,
            MAIN_TARGETS,
            JOBSTREAM_CALLBACK_RETRY_BASE_MS="1000",
            JOBSTREAM_CALLBACK_RETRY_MAX_MS="2000",
            JOBSTREAM_CALLBACK_TOKEN=CALLBACK_TOKEN,
            JOBSTREAM_SWEEP_INTERVAL_S="1",
        )
        multi = pool.submit(
            start_stack, multi_dir, MULTI_TARGETS, JOBSTREAM_HEARTBEAT_INTERVAL_MS="1000"
        )
        started = {"main": main.result(), "multi": multi.result()}
    try:
        yield started
    finally:
        with ThreadPoolExecutor(max_workers=2) as pool:
            for future in [pool.submit(stack.stop) for stack in started.values()]:
                future.result()


@pytest.fixture(scope="package")
def main_stack(stacks: dict[str, Stack]) -> Stack:
    return stacks["main"]


@pytest.fixture(scope="package")
def multi_stack(stacks: dict[str, Stack]) -> Stack:
    return stacks["multi"]


@pytest.fixture(scope="session")
def sink() -> Iterator[Receiver]:
    """A callback receiver that accepts everything (the canonical Task's callback_url)."""
    with receiver(204) as hook:
        yield hook


@pytest.fixture(scope="package")
def main(main_stack: Stack) -> Client:
    """A consumer of the main stack."""
    return main_stack.client


@pytest.fixture(scope="package")
def multi(multi_stack: Stack) -> Client:
    """A consumer of the multi-target stack."""
    return multi_stack.client
