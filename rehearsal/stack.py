"""The deployed stack as the emulator holds it, and the HTTP API route shim."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import boto3

from rehearsal.toolchain import REGION, ROOT_CREDENTIALS, RehearsalError

HTTP_API = "AWS::ApiGatewayV2::Api"
LAMBDA_FUNCTION = "AWS::Lambda::Function"
INTEGRATION = "x-amazon-apigateway-integration"
ANY_METHOD = "x-amazon-apigateway-any-method"
FUNCTION_ARN = re.compile(r"\$\{(\w+)\.Arn\}")


@dataclass(frozen=True)
class RouteSpec:
    """One route of an HTTP API's OpenAPI body: its key and the function it proxies to."""

    route_key: str
    function: str  # logical id
    payload_format: str


def routes_from_body(body: dict[str, Any]) -> list[RouteSpec]:
    """The routes SAM wrote into an HTTP API's OpenAPI `Body` (the processed template)."""
    routes = []
    for path, operations in (body.get("paths") or {}).items():
        for method, operation in operations.items():
            integration = operation.get(INTEGRATION) if isinstance(operation, dict) else None
            if not integration:
                continue
            uri = integration.get("uri")
            text = uri.get("Fn::Sub") if isinstance(uri, dict) else uri
            match = FUNCTION_ARN.search(text if isinstance(text, str) else "")
            if not match:
                raise RehearsalError("routes", f"{method} {path}: unsupported integration {uri}")
            verb = "ANY" if method == ANY_METHOD else method.upper()
            routes.append(
                RouteSpec(
                    route_key="$default" if path == "$default" else f"{verb} {path}",
                    function=match.group(1),
                    payload_format=str(integration.get("payloadFormatVersion", "2.0")),
                )
            )
    return routes


@dataclass
class Stack:
    name: str
    endpoint: str
    _clients: dict[str, Any] = field(default_factory=dict)

    def client(self, service: str) -> Any:
        if service not in self._clients:
            self._clients[service] = boto3.client(
                service,  # type: ignore[call-overload]
                endpoint_url=self.endpoint,
                region_name=REGION,
                aws_access_key_id=ROOT_CREDENTIALS["AWS_ACCESS_KEY_ID"],
                aws_secret_access_key=ROOT_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            )
        return self._clients[service]

    def processed_template(self) -> dict[str, Any]:
        body = self.client("cloudformation").get_template(
            StackName=self.name, TemplateStage="Processed"
        )["TemplateBody"]
        template: dict[str, Any] = json.loads(body) if isinstance(body, str) else body
        return template

    def physical_ids(self) -> dict[str, str]:
        resources = self.client("cloudformation").describe_stack_resources(StackName=self.name)
        return {
            r["LogicalResourceId"]: r["PhysicalResourceId"] for r in resources["StackResources"]
        }

    def function_names(self) -> dict[str, str]:
        """Logical id -> deployed function name, for every function the stack made."""
        template = self.processed_template()
        physical = self.physical_ids()
        return {
            logical: physical[logical]
            for logical, resource in template["Resources"].items()
            if resource["Type"] == LAMBDA_FUNCTION and logical in physical
        }

    def log_groups(self) -> dict[str, str]:
        """Logical id -> the log group each function writes to: its LoggingConfig's, or
        Lambda's default `/aws/lambda/<name>`."""
        lambda_client = self.client("lambda")
        groups = {}
        for logical, name in self.function_names().items():
            configuration = lambda_client.get_function(FunctionName=name)["Configuration"]
            logging = configuration.get("LoggingConfig") or {}
            groups[logical] = logging.get("LogGroup") or f"/aws/lambda/{name}"
        return groups

    def http_apis(self) -> dict[str, tuple[str, dict[str, Any]]]:
        """Logical id -> (API id, OpenAPI body) of every HTTP API in the stack."""
        template = self.processed_template()
        physical = self.physical_ids()
        return {
            logical: (physical[logical], resource.get("Properties", {}).get("Body") or {})
            for logical, resource in template["Resources"].items()
            if resource["Type"] == HTTP_API
        }

    def ensure_routes(self) -> list[str]:
        """Shim: ministack's CloudFormation creates an HTTP API from SAM's OpenAPI `Body` without
        its routes and integrations (AWS imports them). Create the ones missing, from that same
        body, as AWS_PROXY integrations of the functions it names. Returns what was created."""
        api = self.client("apigatewayv2")
        functions = self.function_names()
        created = []
        for api_id, body in self.http_apis().values():
            existing = {r["RouteKey"] for r in api.get_routes(ApiId=api_id)["Items"]}
            integrations: dict[str, str] = {}
            for route in routes_from_body(body):
                if route.route_key in existing:
                    continue
                if route.function not in functions:
                    raise RehearsalError(
                        "routes", f"{route.route_key} names {route.function}, not in the stack"
                    )
                arn = self.client("lambda").get_function(FunctionName=functions[route.function])[
                    "Configuration"
                ]["FunctionArn"]
                if arn not in integrations:
                    integrations[arn] = api.create_integration(
                        ApiId=api_id,
                        IntegrationType="AWS_PROXY",
                        IntegrationUri=arn,
                        PayloadFormatVersion=route.payload_format,
                    )["IntegrationId"]
                api.create_route(
                    ApiId=api_id,
                    RouteKey=route.route_key,
                    Target=f"integrations/{integrations[arn]}",
                )
                created.append(f"{route.route_key} -> {route.function}")
        return created

    def _event_source_mappings(self) -> list[dict[str, Any]]:
        """The stack's queue triggers (not the dispatcher's, on the table's stream)."""
        names = set(self.function_names().values())
        mappings = self.client("lambda").list_event_source_mappings()["EventSourceMappings"]
        return [
            m
            for m in mappings
            if m["FunctionArn"].rsplit(":", 1)[-1] in names
            and str(m.get("EventSourceArn", "")).startswith("arn:aws:sqs:")
        ]

    @contextmanager
    def queue_triggers_paused(self) -> Iterator[None]:
        """Disable the stack's queue triggers (as an operator can), enable them again after."""
        lambda_client = self.client("lambda")
        mappings = self._event_source_mappings()
        for mapping in mappings:
            lambda_client.update_event_source_mapping(UUID=mapping["UUID"], Enabled=False)
        try:
            yield
        finally:
            for mapping in mappings:
                lambda_client.update_event_source_mapping(UUID=mapping["UUID"], Enabled=True)

    def queues_drained(self) -> bool:
        """Whether every queue that triggers a function holds no message, visible or in flight."""
        sqs = self.client("sqs")
        for mapping in self._event_source_mappings():
            name = mapping["EventSourceArn"].rsplit(":", 1)[-1]
            url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
            attributes = sqs.get_queue_attributes(
                QueueUrl=url,
                AttributeNames=[
                    "ApproximateNumberOfMessages",
                    "ApproximateNumberOfMessagesNotVisible",
                ],
            )["Attributes"]
            if any(int(value) for value in attributes.values()):
                return False
        return True

    def api_id(self) -> str:
        apis = self.http_apis()
        if len(apis) != 1:
            raise RehearsalError(
                "routes", f"expected one HTTP API in the stack, found {list(apis)}"
            )
        return next(iter(apis.values()))[0]

    def operator_roles(self) -> list[str]:
        """ARNs of the stack's roles that people (this account), not a service, assume."""
        iam = self.client("iam")
        physical = self.physical_ids()
        found = []
        for logical, resource in self.processed_template()["Resources"].items():
            if resource["Type"] != "AWS::IAM::Role" or logical not in physical:
                continue
            trust = resource.get("Properties", {}).get("AssumeRolePolicyDocument") or {}
            principals = [s.get("Principal") or {} for s in trust.get("Statement") or []]
            if any(isinstance(p, dict) and "AWS" in p for p in principals):
                found.append(iam.get_role(RoleName=physical[logical])["Role"]["Arn"])
        return found

    def outputs(self) -> dict[str, str]:
        stack = self.client("cloudformation").describe_stacks(StackName=self.name)["Stacks"][0]
        return {o["OutputKey"]: o.get("OutputValue", "") for o in stack.get("Outputs", [])}
