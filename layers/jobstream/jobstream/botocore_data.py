"""botocore's data, read for the clients this package makes rather than for every service.

A plain botocore session, for its first client, reads two things no client of ours needs whole:
- the names of every service botocore knows, twice (before the service's model and before its
  endpoint rules): a scan of some 450 folders, about 25 ms of a cold start;
- endpoints.json, 1.2 MB of every service's legacy endpoint data (about 20 ms), of which a client
  uses its own service's entry: it names the client's region and signing, while each request's
  URL comes from the service's endpoint rules.
`ClientDataLoader` answers the first for the service whose model is being loaded, and the second,
for the services of `NARROWED_SERVICES`, with the same file narrowed to those services
(`botocore_endpoints.json`, made from the pinned botocore by `make botocore-endpoints`; a test
keeps it equal to what that botocore holds). Every model and rule set is botocore's own file.

A runtime whose botocore knows a region the narrowed file does not (a region launched after the
pin) resolves it as botocore does any region of a partition it has no entry for: with the
partition's defaults, while the URL still comes from the runtime's own rules.

Imported with the first client (jobstream/aws.py), never before: importing it imports botocore.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Final

from botocore.exceptions import DataNotFoundError
from botocore.loaders import Loader, create_loader

ENDPOINTS: Final = "endpoints"
NARROWED_ENDPOINTS_FILE: Final = Path(__file__).with_name("botocore_endpoints.json")
# The services of every client the layer makes (a test keeps this equal to those it makes).
NARROWED_SERVICES: Final = frozenset({"dynamodb", "s3", "secretsmanager", "sns", "sqs", "ssm"})


def narrowed_endpoints(full: dict[str, Any]) -> dict[str, Any]:
    """botocore's endpoint data with only the entries of NARROWED_SERVICES in each partition."""
    partitions = [
        {
            **partition,
            "services": {
                name: entry
                for name, entry in partition["services"].items()
                if name in NARROWED_SERVICES
            },
        }
        for partition in full["partitions"]
    ]
    return {**full, "partitions": partitions}


def _narrowed() -> dict[str, Any]:
    # Read for each session, as botocore reads its own file: its resolver changes what it read.
    loaded: dict[str, Any] = json.loads(NARROWED_ENDPOINTS_FILE.read_text(encoding="utf-8"))
    return loaded


class ClientDataLoader(Loader):
    """botocore's loader, with the two answers above; `narrow_endpoints` only in a session whose
    clients are all of NARROWED_SERVICES (the session's endpoint data serves all its clients)."""

    def __init__(self, data_path: str | None, *, narrow_endpoints: bool) -> None:
        # The search paths botocore's own loader has for the session's data_path (AWS_DATA_PATH).
        paths = list(create_loader(data_path).search_paths)
        super().__init__(extra_search_paths=paths, include_default_search_paths=False)
        # The services whose models this thread is loading: a client's own, and those of the
        # clients botocore makes for itself meanwhile (STS, SSO, for credentials).
        self._loading = threading.local()
        self._narrow_endpoints = narrow_endpoints

    def load_service_model(
        self, service_name: str, type_name: str, api_version: str | None = None
    ) -> Any:
        outer = self._services_loading()
        self._loading.services = (*outer, service_name)
        try:
            return super().load_service_model(service_name, type_name, api_version)
        finally:
            self._loading.services = outer

    def list_available_services(self, type_name: str) -> list[str]:
        """While a model loads, botocore asks this to refuse an unknown service: answered for
        that service, by whether it has data of `type_name`. Asked otherwise, botocore's own
        answer (the scan of every service)."""
        loading = self._services_loading()
        if not loading:
            every: list[str] = super().list_available_services(type_name)
            return every
        return [loading[-1]] if self._offers(loading[-1], type_name) else []

    def _services_loading(self) -> tuple[str, ...]:
        services: tuple[str, ...] = getattr(self._loading, "services", ())
        return services

    def _offers(self, service: str, type_name: str) -> bool:
        try:
            self.list_api_versions(service, type_name)
        except DataNotFoundError:
            return False
        return True

    def load_data_with_path(self, name: str) -> tuple[Any, str]:
        if name == ENDPOINTS and self._narrow_endpoints and not self._overridden(name):
            # Named as the file it narrows: botocore treats its own endpoint data as such, letting
            # each service's rules make every URL (other data would make them itself).
            return _narrowed(), str(Path(self.BUILTIN_DATA_PATH) / name)
        found: tuple[Any, str] = super().load_data_with_path(name)
        return found

    def _overridden(self, name: str) -> bool:
        """Whether a search path before botocore's own (AWS_DATA_PATH, ~/.aws/models) has the
        file: then it is read as botocore would, whole."""
        return any(
            self.file_loader.exists(str(Path(path) / name))
            for path in self.search_paths
            if path != self.BUILTIN_DATA_PATH
        )
