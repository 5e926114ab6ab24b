"""One error model: every exception the layer defines derives from `JobstreamError`
(docs/architecture.md, "Errors")."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import jobstream
from jobstream.errors import JobstreamError


def layer_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class a module of the layer defines, by its qualified name."""
    found: dict[str, type[BaseException]] = {}
    for module_info in pkgutil.walk_packages(jobstream.__path__, "jobstream."):
        module = importlib.import_module(module_info.name)
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
            ):
                found[f"{module.__name__}.{name}"] = value
    return found


def test_every_error_of_the_layer_derives_from_the_base() -> None:
    exceptions = layer_exceptions()
    assert "jobstream.protocol.errors.ProtocolError" in exceptions  # the scan sees the layer
    outside = sorted(
        name for name, error in exceptions.items() if not issubclass(error, JobstreamError)
    )
    assert outside == []
