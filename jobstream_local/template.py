"""Reading template.yaml: the resources and HTTP API routes the local stack reproduces."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPOSITORY = Path(__file__).resolve().parent.parent
TEMPLATE = REPOSITORY / "template.yaml"
LOCAL_STACK_NAME = "jobstream-local"


class _CfnLoader(yaml.SafeLoader):
    """YAML loader that keeps CloudFormation short-form tags (!Ref, !Sub, ...) as data."""


def _tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    if isinstance(node, yaml.ScalarNode):
        value: Any = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    name = "Ref" if suffix == "Ref" else f"Fn::{suffix}"
    return {name: value}


_CfnLoader.add_multi_constructor("!", _tag)


@dataclass(frozen=True)
class HttpRoute:
    method: str
    path: str
    function: str
    code_dir: Path
    handler: str

    @property
    def route_key(self) -> str:
        return "$default" if self.path == "$default" else f"{self.method} {self.path}"


@dataclass(frozen=True)
class Template:
    document: dict[str, Any]

    @classmethod
    def load(cls, path: Path = TEMPLATE) -> Template:
        return cls(yaml.load(path.read_text(encoding="utf-8"), Loader=_CfnLoader))  # noqa: S506 - a SafeLoader subclass

    @property
    def resources(self) -> dict[str, Any]:
        resources: dict[str, Any] = self.document["Resources"]
        return resources

    def physical_name(self, logical_id: str) -> str:
        return f"{LOCAL_STACK_NAME}-{logical_id}"

    def resources_of_type(self, resource_type: str) -> dict[str, dict[str, Any]]:
        return {
            logical_id: resource.get("Properties", {})
            for logical_id, resource in self.resources.items()
            if resource["Type"] == resource_type
        }

    def http_routes(self) -> list[HttpRoute]:
        routes = []
        for name, properties in self.resources_of_type("AWS::Serverless::Function").items():
            for event in (properties.get("Events") or {}).values():
                if event["Type"] != "HttpApi":
                    continue
                routes.append(
                    HttpRoute(
                        method=event["Properties"]["Method"].upper(),
                        path=event["Properties"]["Path"],
                        function=name,
                        code_dir=REPOSITORY / properties["CodeUri"],
                        handler=properties["Handler"],
                    )
                )
        return routes

    def function_environment(self, overrides: dict[str, str]) -> dict[str, str]:
        """Globals environment, !Ref resolved: parameters to defaults, resources to local names."""
        variables = self.document["Globals"]["Function"]["Environment"]["Variables"]
        environment = {}
        for name, value in variables.items():
            environment[name] = overrides.get(name) or self.resolve(value)
        return environment

    def resolve(self, value: Any) -> str:
        if isinstance(value, dict) and "Ref" in value:
            ref = value["Ref"]
            parameter = self.document.get("Parameters", {}).get(ref)
            if parameter is not None:
                return str(parameter.get("Default", ""))
            return self.physical_name(ref)
        return str(value)
