"""Start ministack with IAM enforcement on and the rehearsal's fidelity shims applied.

Runs inside the emulator's own virtualenv (ministack pins its own botocore), never imported by
the rest of the rehearsal. Each shim closes a gap between ministack and AWS that would let a
broken deployment pass, or fail a correct one; each logs one line tagged ``[rehearsal-shim]``
when it changes an outcome, so the rehearsal can quote it.

Environment (set by rehearsal.emulator): ``REHEARSAL_LAMBDA_PYTHON`` (the Lambda runtime's
interpreter), plus ministack's own ``AUTH``, ``GATEWAY_PORT``, ``BIND_HOST``.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import os
import re
import sys
import urllib.parse
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

SHIM_LOG = logging.getLogger("rehearsal")
REPOSITORY = Path(__file__).resolve().parent.parent
SCHEDULER = "scheduler.amazonaws.com"
API_GATEWAY = "apigateway.amazonaws.com"

# AWS: "You cannot set permissions explicitly for SendMessageBatch, DeleteMessageBatch, or
# ChangeMessageVisibilityBatch. Instead, setting permissions for SendMessage, DeleteMessage, or
# ChangeMessageVisibility sets permissions for the corresponding batch versions of the actions."
SQS_BATCH_ACTIONS = {
    "sqs:SendMessageBatch": "sqs:SendMessage",
    "sqs:DeleteMessageBatch": "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibilityBatch": "sqs:ChangeMessageVisibility",
}
FIRST_RUN_AFTER_S = 5
PYTHON_RUNTIME = re.compile(r"^python(\d+\.\d+)$")


def _say(message: str, *args: object) -> None:
    SHIM_LOG.warning("[rehearsal-shim] " + message, *args)


def shim_lambda_runtime() -> None:
    """Python functions run in a clean interpreter with only what Lambda's runtime provides.

    ministack runs Python functions with its own interpreter, whose site-packages (pydantic,
    PyYAML, boto3...) would hide a dependency missing from the layer. The rehearsal's Lambda
    runtime is a virtualenv holding only boto3, like the managed runtime; a function whose
    ``Runtime`` names another Python version fails its init, as its wheels would on AWS.
    """
    from ministack.core import lambda_runtime

    runtime_python = os.environ["REHEARSAL_LAMBDA_PYTHON"]
    runtime_version = os.environ["REHEARSAL_LAMBDA_PYTHON_VERSION"]
    original = lambda_runtime._detect_runtime_binary

    def detect(runtime: str) -> tuple[str, str]:
        binary, script = original(runtime)
        match = PYTHON_RUNTIME.match(runtime)
        if not match:
            return binary, script
        if match.group(1) != runtime_version:
            _say("runtime %s requested; the rehearsal runs python%s", runtime, runtime_version)
            raise RuntimeError(
                f"the rehearsal's Lambda runtime is python{runtime_version}, not {runtime}"
            )
        return runtime_python, script

    lambda_runtime._detect_runtime_binary = detect


def shim_sqs_batch_permissions() -> None:
    """SQS batch calls are authorized by their single-message action, as on AWS."""
    from ministack.core import iam_actions

    original = iam_actions.extract_iam_action

    def extract(*args: Any, **kwargs: Any) -> str | None:
        action: str | None = original(*args, **kwargs)
        return SQS_BATCH_ACTIONS.get(action, action) if action else action

    iam_actions.extract_iam_action = extract


def _policy_document(raw: object) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    text = str(raw or "{}")
    if not text.lstrip().startswith("{"):
        text = urllib.parse.unquote(text)
    document: dict[str, Any] = json.loads(text)
    return document


def _as_list(value: object) -> list[Any]:
    return value if isinstance(value, list) else [value]


def trusts_service(trust_policy: dict[str, Any], service: str) -> bool:
    """Whether a role's trust policy lets ``service`` assume it (sts:AssumeRole, no Deny)."""
    for statement in _as_list(trust_policy.get("Statement", [])):
        principal = statement.get("Principal") or {}
        services = _as_list(principal.get("Service", [])) if isinstance(principal, dict) else []
        actions = _as_list(statement.get("Action", []))
        if (
            statement.get("Effect") == "Allow"
            and (service in services or principal == "*")
            and any(fnmatch.fnmatchcase("sts:AssumeRole", a) for a in actions)
        ):
            return True
    return False


def shim_scheduler_role() -> None:
    """A schedule invokes its target only if its role trusts the Scheduler and may invoke it.

    On AWS the schedule assumes its role (which must trust scheduler.amazonaws.com) and invokes
    the target with it (lambda:InvokeFunction). ministack invokes the target without the role.
    """
    from ministack.core import iam_evaluator
    from ministack.services import eventbridge, iam

    original = eventbridge._invoke_target

    def invoke_target(target: dict[str, Any], event: dict[str, Any], rule: Any, *rest: Any) -> Any:
        role_arn = target.get("RoleArn") if isinstance(rule, dict) else None
        invokes_lambda = str(target.get("Arn", "")).startswith("arn:aws:lambda:")
        if role_arn and invokes_lambda and "ScheduleExpression" in rule:
            problem = _schedule_role_problem(iam, iam_evaluator, role_arn, target.get("Arn", ""))
            if problem:
                _say("schedule %s did not invoke %s: %s", rule.get("Name"), target["Arn"], problem)
                return None
        return original(target, event, rule, *rest)

    eventbridge._invoke_target = invoke_target


def _schedule_role_problem(iam: Any, evaluator: Any, role_arn: str, target_arn: str) -> str | None:
    account, role_name = role_arn.split(":")[4], role_arn.rsplit("/", 1)[-1]
    role = iam._roles.get_scoped(account, None, role_name)
    if role is None:
        return f"role {role_arn} does not exist"
    if not trusts_service(_policy_document(role.get("AssumeRolePolicyDocument")), SCHEDULER):
        return f"role {role_name} does not trust {SCHEDULER}"
    context = evaluator.EvalContext(
        principal_arn=f"arn:aws:sts::{account}:assumed-role/{role_name}/scheduler",
        principal_type="AssumedRole",
        principal_account=account,
        action="lambda:InvokeFunction",
        resource_arn=target_arn,
        region=target_arn.split(":")[3],
    )
    result = evaluator.evaluate(context, evaluator._gather_role_policies(role_name, account))
    if result.decision != "Allow":
        return f"role {role_name} is not allowed lambda:InvokeFunction ({result.reason})"
    return None


def shim_scheduler_first_run() -> None:
    """rate() schedules first fire seconds after they exist, not a whole period later.

    Only the timing differs: the schedule, its role and its target are the deployed ones. It
    spares the rehearsal a minute's wait for the first sweep of `rate(1 minute)`.
    """
    from ministack.services import eventbridge, scheduler

    original = scheduler._tick_schedules

    def tick() -> None:
        for key, schedule in list(scheduler._schedules._data.items()):
            interval = eventbridge._parse_rate_seconds(schedule.get("ScheduleExpression", ""))
            created = schedule.get("CreationDate")
            if key in scheduler._schedule_last_fired or not interval:
                continue
            if isinstance(created, int | float):
                scheduler._schedule_last_fired[key] = created - interval + FIRST_RUN_AFTER_S
        original()

    scheduler._tick_schedules = tick


def source_arn_allowed(policy: dict[str, Any], source_arn: str) -> bool:
    """Whether a function's resource policy lets API Gateway invoke it for ``source_arn``."""
    for statement in _as_list(policy.get("Statement", [])):
        principal = statement.get("Principal") or {}
        service = principal.get("Service") if isinstance(principal, dict) else principal
        actions = _as_list(statement.get("Action", []))
        if statement.get("Effect") != "Allow" or service not in (API_GATEWAY, "*"):
            continue
        if not any(fnmatch.fnmatchcase("lambda:InvokeFunction", a) for a in actions):
            continue
        conditions = statement.get("Condition") or {}
        patterns = [
            pattern
            for operator in ("ArnLike", "ArnEquals", "StringLike", "StringEquals")
            for key, value in (conditions.get(operator) or {}).items()
            if key.lower() == "aws:sourcearn"
            for pattern in _as_list(value)
        ]
        if not patterns or any(fnmatch.fnmatchcase(source_arn, p) for p in patterns):
            return True
    return False


def shim_api_invoke_permission() -> None:
    """API Gateway invokes a function only where the function's resource policy allows it.

    On AWS that is an AWS::Lambda::Permission for apigateway.amazonaws.com whose SourceArn
    matches the route; ministack's HTTP API invokes any integration's function.
    """
    from ministack.services import apigateway, lambda_svc

    original = apigateway._invoke_lambda_proxy

    async def invoke(
        integration: dict[str, Any],
        api_id: str,
        stage: str,
        path: str,
        method: str,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        ref = apigateway._extract_lambda_ref_from_integration_uri(
            integration.get("integrationUri", "")
        )
        record, config, _ = lambda_svc._get_func_record_for_ref_in_scope(
            ref, account_id=kwargs.get("owner_account_id"), region=kwargs.get("owner_region")
        )
        if record is not None and config is not None:
            arn = config["FunctionArn"]
            region, account = arn.split(":")[3], arn.split(":")[4]
            source = f"arn:aws:execute-api:{region}:{account}:{api_id}/{stage}/{method}{path}"
            if not source_arn_allowed(record.get("policy") or {}, source):
                _say(
                    "API Gateway may not invoke %s for %s: no lambda:InvokeFunction "
                    "permission for apigateway.amazonaws.com matches",
                    arn,
                    source,
                )
                body = json.dumps({"message": "Internal Server Error"}).encode()
                return 500, {"Content-Type": "application/json"}, body
        return await original(integration, api_id, stage, path, method, *args, **kwargs)

    apigateway._invoke_lambda_proxy = invoke


def slash_stripped(path: str) -> str | None:
    """The path without its trailing slash (`/console/` -> `/console`); None without one."""
    return path.rstrip("/") or None if len(path) > 1 and path.endswith("/") else None


def shim_trailing_slash_routes() -> None:
    """A path with a trailing slash reaches the route without it, as on AWS.

    API Gateway routes `/console/` to `GET /console` (its `rawPath` keeps the slash), which the
    console's page relies on; ministack matches no route and answers from `$default` (a 404).
    """
    from ministack.services import apigateway

    match, extract = apigateway._match_route, apigateway._extract_path_params

    def match_route(api_id: str, method: str, path: str) -> Any:
        route = match(api_id, method, path)
        shorter = slash_stripped(path)
        if shorter is None or (route is not None and route.get("routeKey") != "$default"):
            return route
        return match(api_id, method, shorter) or route

    def extract_path_params(route_path: str, request_path: str) -> Any:
        found = extract(route_path, request_path)
        shorter = slash_stripped(request_path)
        return extract(route_path, shorter) if found is None and shorter else found

    apigateway._match_route = match_route
    apigateway._extract_path_params = extract_path_params


def secret_name(secrets: Iterable[tuple[str, dict[str, Any]]], physical_id: str) -> str:
    """The name ministack stores a secret under, from its ARN (or its name)."""
    for name, secret in secrets:
        if secret.get("ARN") == physical_id:
            return str(name)
    return physical_id


def integer_scaling(props: Any) -> Any:
    """Event source mapping properties with ScalingConfig.MaximumConcurrency as an integer."""
    scaling = props.get("ScalingConfig") if isinstance(props, dict) else None
    if isinstance(scaling, dict) and isinstance(scaling.get("MaximumConcurrency"), str):
        concurrency = int(scaling["MaximumConcurrency"])
        return {**props, "ScalingConfig": {**scaling, "MaximumConcurrency": concurrency}}
    return props


def shim_secret_ref_is_its_arn() -> None:
    """`Ref` of an AWS::SecretsManager::Secret is the secret's ARN, as on AWS.

    ministack's CloudFormation gives the secret's name as its physical id (what `Ref` returns),
    so a policy with `Resource: !Ref TheSecret` names no ARN and IAM refuses the functions'
    correct `secretsmanager:GetSecretValue`; `!Ref` handed to the functions as a secret id would
    work by luck where AWS gives an ARN. The secret itself is created and stored as ministack does.
    """
    from ministack.services import secretsmanager
    from ministack.services.cloudformation import provisioners

    handlers = provisioners._RESOURCE_HANDLERS["AWS::SecretsManager::Secret"]
    create, update, delete = handlers["create"], handlers["update"], handlers["delete"]

    def name_of(physical_id: str) -> str:
        return secret_name(secretsmanager._secrets.items(), physical_id)

    def create_secret(logical_id: str, props: Any, stack_name: str) -> Any:
        _, attributes = create(logical_id, props, stack_name)
        return attributes["Arn"], attributes

    def update_secret(
        physical_id: str, old: Any, new: Any, stack_name: str, logical_id: str | None = None
    ) -> Any:
        _, attributes = update(name_of(physical_id), old, new, stack_name, logical_id)
        return attributes["Arn"], attributes

    def delete_secret(physical_id: str, props: Any) -> None:
        delete(name_of(physical_id), props)

    handlers.update(create=create_secret, update=update_secret, delete=delete_secret)


def shim_event_source_integers() -> None:
    """An event source mapping's ScalingConfig.MaximumConcurrency is an integer, as on AWS.

    A template gives it from a Number parameter (`!Ref WorkerMaxConcurrency`), whose value
    CloudFormation passes as a string and AWS converts to the property's type; ministack stores
    the string, and its SQS poller then fails on every pass (`'>=' not supported between
    instances of 'int' and 'str'`), so no queue triggers any function.
    """
    from ministack.services.cloudformation import provisioners

    handlers = provisioners._RESOURCE_HANDLERS["AWS::Lambda::EventSourceMapping"]
    create, update = handlers["create"], handlers["update"]

    def create_mapping(logical_id: str, props: Any, stack_name: str) -> Any:
        return create(logical_id, integer_scaling(props), stack_name)

    def update_mapping(physical_id: str, old: Any, new: Any, stack_name: str) -> Any:
        return update(physical_id, integer_scaling(old), integer_scaling(new), stack_name)

    handlers.update(create=create_mapping, update=update_mapping)


def first_metric(props: Any) -> Any:
    """An alarm's properties with its metric math replaced by the first metric it reads."""
    queries = props.get("Metrics") if isinstance(props, dict) else None
    if not queries:
        return props
    stats = [q["MetricStat"] for q in queries if isinstance(q, dict) and "MetricStat" in q]
    if not stats or not any("Expression" in q for q in queries):
        raise ValueError("an alarm's Metrics need a MetricStat and an Expression")
    metric = stats[0]["Metric"]
    kept = {key: value for key, value in props.items() if key != "Metrics"}
    return {
        **kept,
        "Namespace": metric["Namespace"],
        "MetricName": metric["MetricName"],
        "Dimensions": metric.get("Dimensions") or [],
        "Statistic": stats[0].get("Stat", "Sum"),
        "Period": stats[0].get("Period", 60),
    }


def shim_metric_math_alarms() -> None:
    """An alarm on metric math (`Metrics`) is created, as on AWS, recorded on its first metric.

    ministack's CloudFormation refuses `AWS::CloudWatch::Alarm` with `Metrics`; AWS evaluates the
    expression. The rehearsal proves no alarm fires either way (docs/operations.md): it keeps the
    alarm a resource of the stack, so a deploy and a teardown handle it as they would on AWS.
    """
    from ministack.services.cloudformation import provisioners

    handlers = provisioners._RESOURCE_HANDLERS["AWS::CloudWatch::Alarm"]
    create, update = handlers["create"], handlers["update"]

    def create_alarm(logical_id: str, props: Any, stack_name: str) -> Any:
        return create(logical_id, first_metric(props), stack_name)

    def update_alarm(physical_id: str, old: Any, new: Any, stack_name: str, *rest: Any) -> Any:
        return update(physical_id, first_metric(old), first_metric(new), stack_name, *rest)

    handlers.update(create=create_alarm, update=update_alarm)


def shim_secret_resource_policy() -> None:
    """`AWS::SecretsManager::ResourcePolicy` puts a secret's policy, which IAM enforces.

    ministack's CloudFormation does not know the type (it refuses the template); its Secrets
    Manager stores and enforces a policy put through the API, which this handler calls.
    """
    from ministack.services import secretsmanager
    from ministack.services.cloudformation import provisioners

    def put(props: Any) -> Any:
        policy = props["ResourcePolicy"]
        text = policy if isinstance(policy, str) else json.dumps(policy)
        status = secretsmanager._put_resource_policy(
            {"SecretId": props["SecretId"], "ResourcePolicy": text}
        )
        body = json.loads(status[2]) if isinstance(status, tuple) else {}
        if "ARN" not in body:
            raise ValueError(f"AWS::SecretsManager::ResourcePolicy: {status!r}")
        return body["ARN"], {"Id": body["ARN"]}

    # ministack's handler signatures: (logical id, props, stack), (physical id, old, new,
    # stack), (physical id, props).
    def create_policy(*arguments: Any) -> Any:
        return put(arguments[1])

    def update_policy(*arguments: Any) -> Any:
        return put(arguments[2])

    def delete_policy(*arguments: Any) -> None:
        secretsmanager._delete_resource_policy({"SecretId": arguments[0]})

    provisioners._RESOURCE_HANDLERS["AWS::SecretsManager::ResourcePolicy"] = {
        "create": create_policy,
        "update": update_policy,
        "delete": delete_policy,
    }


def shim_event_filter_leaves() -> None:
    """Event filters match a record's leaves only, as Lambda's do (an object is no value).

    ministack treats `exists` on an object as a key test and fails a pattern object whose key is
    absent: the dispatcher's `{"N": [{"exists": false}]}` (an attribute not set) then never
    matched, and the former `[{"exists": false}]` on the attribute itself (which AWS never
    matches against) passed the rehearsal. The rule is jobstream_local/event_filter.py's, the
    local stack's too.
    """
    from ministack.services import lambda_svc

    sys.path.insert(0, str(REPOSITORY))
    from jobstream_local.event_filter import matches

    def match(record: dict[str, Any], pattern: dict[str, Any]) -> bool:
        return matches(pattern, record)

    lambda_svc._match_esm_filter = match


ASSUMED_ROLE = re.compile(r"^arn:(aws[a-z-]*):sts::(\d{12}):assumed-role/([^/]+)/[^/]+$")


def principal_arn(value: Any) -> Any:
    """aws:PrincipalArn of a role session: the role's ARN, not the session's."""
    match = ASSUMED_ROLE.match(value) if isinstance(value, str) else None
    if match is None:
        return value
    partition, account, role = match.groups()
    return f"arn:{partition}:iam::{account}:role/{role}"


def shim_principal_arn_of_a_role() -> None:
    """`aws:PrincipalArn` of a role's session is the role's ARN, as on AWS.

    AWS: "For IAM roles, the request context returns the ARN of the role, not the ARN of the
    user that assumed the role". ministack gives the session's `sts` ARN, so a resource policy
    that names roles (the registry secret's) would refuse the very roles it names.
    """
    from ministack.core import iam_evaluator

    original = iam_evaluator._resolve_condition_key

    def resolve(key: str, ctx: Any) -> Any:
        value = original(key, ctx)
        return principal_arn(value) if key.lower() == "aws:principalarn" else value

    iam_evaluator._resolve_condition_key = resolve


SHIMS: tuple[Callable[[], None], ...] = (
    shim_lambda_runtime,
    shim_sqs_batch_permissions,
    shim_scheduler_role,
    shim_scheduler_first_run,
    shim_api_invoke_permission,
    shim_trailing_slash_routes,
    shim_secret_ref_is_its_arn,
    shim_event_source_integers,
    shim_metric_math_alarms,
    shim_secret_resource_policy,
    shim_principal_arn_of_a_role,
    shim_event_filter_leaves,
)


def main() -> None:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s [%(name)s] %(message)s"
    )
    for shim in SHIMS:
        shim()
    from ministack.app import main as ministack_main

    sys.argv = ["ministack"]
    ministack_main()


if __name__ == "__main__":
    main()
