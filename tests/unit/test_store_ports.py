"""The services depend on the store's protocols (store/ports.py), not on its DynamoDB classes."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from jobstream.store.callbacks import CallbackStore
from jobstream.store.jobs import JobStore
from jobstream.store.ports import CallbackStorePort, JobStorePort

SERVICES = Path(__file__).resolve().parents[2] / "layers" / "jobstream" / "jobstream" / "service"
CONCRETE = {("jobstream.store.jobs", "JobStore"), ("jobstream.store.callbacks", "CallbackStore")}


def _public(cls: type) -> set[str]:
    return {name for name, _ in inspect.getmembers(cls) if not name.startswith("_")}


@pytest.mark.parametrize(
    ("implementation", "port"),
    [(JobStore, JobStorePort), (CallbackStore, CallbackStorePort)],
)
def test_each_store_offers_every_method_of_its_port_with_the_same_signature(
    implementation: type, port: type
) -> None:
    wanted = _public(port)
    assert wanted <= _public(implementation)
    for name in wanted:
        assert inspect.signature(getattr(implementation, name)).parameters.keys() == (
            inspect.signature(getattr(port, name)).parameters.keys()
        ), name


@pytest.mark.parametrize(
    ("implementation", "port"),
    [(JobStore, JobStorePort), (CallbackStore, CallbackStorePort)],
)
def test_every_public_operation_of_a_store_is_in_its_port(implementation: type, port: type) -> None:
    # `client` and the table's name are the implementation's own business.
    own = {"client", "client_factory", "table_name"}
    assert _public(implementation) - own <= _public(port)


def test_no_service_imports_a_concrete_store() -> None:
    # The one place that builds the concrete store is the runtime (jobstream/runtime.py); the
    # services see no module of store/ but its ports at all (tests/unit/test_layering.py).
    offenders = []
    for path in sorted(SERVICES.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                offenders += [
                    f"{path.name}: {node.module}.{alias.name}"
                    for alias in node.names
                    if (node.module, alias.name) in CONCRETE
                ]
    assert offenders == []
