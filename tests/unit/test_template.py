"""template.yaml: the cross-references and conventions cfn-lint does not check.

Each check is a function that takes the loaded template (and the repository root the template's
relative paths are read from) and returns the problems it finds; the tests parametrize those over
the real template, and a few tests at the end run them on edited copies to show they can fail.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic.plugin import _loader

from jobstream.config.settings import ENVIRONMENT, SHORTHAND
from jobstream.store import keys
from jobstream_local.child import REPOSITORY
from jobstream_local.template import TEMPLATE, Template

PSEUDO_PARAMETERS = frozenset(
    {
        "AWS::Region",
        "AWS::AccountId",
        "AWS::Partition",
        "AWS::URLSuffix",
        "AWS::StackName",
        "AWS::NoValue",
    }
)
RUNTIME = "python3.13"
ARCHITECTURES = ["arm64"]
SAM_DEFAULT_TIMEOUT = 3  # seconds, when neither the function nor Globals says
SQS_DEFAULT_VISIBILITY = 30  # seconds, when the queue does not say
VISIBILITY_FACTOR = 6  # Lambda's SQS integration: visibility >= 6x the function's timeout
SQS_UNWINDOWED_BATCH = 10  # the largest SQS BatchSize Lambda takes without a batching window
FUNCTION = "AWS::Serverless::Function"
QUEUE = "AWS::SQS::Queue"

# Variables the template sets that are not settings fields, and the source file that reads each.
READ_ELSEWHERE = {
    "JOBSTREAM_AWS_ENDPOINT_URL": "layers/jobstream/jobstream/aws.py",
    "JOBSTREAM_PIXIV_REFRESH_TOKEN_PARAMETER": (
        "layers/jobstream/jobstream/jobtypes/sources/pixiv.py"
    ),
    "JOBSTREAM_CATALOG": "layers/jobstream/jobstream/jobtypes/sources/catalog.py",
    # asset_fetch's own configuration, read when one of its jobs runs.
    "JOBSTREAM_ASSET_BUCKET": "layers/jobstream/jobstream/jobtypes/asset_fetch/config.py",
    "JOBSTREAM_ASSET_URL_TTL_S": "layers/jobstream/jobstream/jobtypes/asset_fetch/config.py",
    "JOBSTREAM_ASSET_MAX_BYTES": "layers/jobstream/jobstream/jobtypes/asset_fetch/config.py",
    # Powertools' own variables: observability.py reads each (service, EMF namespace, Tracer).
    "POWERTOOLS_SERVICE_NAME": "layers/jobstream/jobstream/observability.py",
    "POWERTOOLS_METRICS_NAMESPACE": "layers/jobstream/jobstream/observability.py",
    "POWERTOOLS_TRACE_DISABLED": "layers/jobstream/jobstream/observability.py",
}
# Variables the template sets for a dependency, and the dependency's module that reads each (the
# installed release: a rename there fails here instead of quietly costing every cold start).
READ_BY_DEPENDENCIES = {"PYDANTIC_DISABLE_PLUGINS": "pydantic.plugin._loader"}
# Settings variables that may be set per function rather than in Globals.
PER_FUNCTION_SETTINGS = frozenset({"JOBSTREAM_SWEEP_BUDGET_MS"})
# Settings variables for local runs only: a tenants file would ship secrets in the artifact.
LOCAL_ONLY_SETTINGS = frozenset({"JOBSTREAM_TENANTS"})
SETTING_VARIABLES = frozenset(ENVIRONMENT.values())
# The one-tenant shorthand puts tokens and secrets in the environment: never in the template.
SECRET_VARIABLES = frozenset(SHORTHAND.values())
# The functions that read the consumer registry: every HTTP function (authentication) and the
# callbacks function (credentials and origins at send time); no other may read the secret.
REGISTRY_READERS = frozenset(
    {"AdmissionFunction", "JobsFunction", "EventsFunction", "AckFunction", "CallbacksFunction"}
)
# The functions behind the HTTP API: each reserves `ApiReservedConcurrency` when it is set.
HTTP_FUNCTIONS = ("AdmissionFunction", "JobsFunction", "EventsFunction", "AckFunction")
TABLE_INDEXES = (keys.TENANT_INDEX, keys.CORRELATION_INDEX, keys.SWEEP_INDEX)
# The registry: the stack's own secret, or one it adopts (ExistingTenantsSecretArn).
ADOPTABLE_SECRET = {
    "Fn::If": [
        "CreatesTenantsSecret",
        {"Ref": "TenantsSecret"},
        {"Ref": "ExistingTenantsSecretArn"},
    ]
}

SUB_VARIABLE = re.compile(r"\$\{([^}]*)\}")


# ---------------------------------------------------------------------------------- helpers


def parameters(template: Template) -> dict[str, Any]:
    found: dict[str, Any] = template.document.get("Parameters") or {}
    return found


def conditions(template: Template) -> dict[str, Any]:
    found: dict[str, Any] = template.document.get("Conditions") or {}
    return found


def globals_function(template: Template) -> dict[str, Any]:
    found: dict[str, Any] = (template.document.get("Globals") or {}).get("Function") or {}
    return found


def function_setting(template: Template, properties: dict[str, Any], name: str) -> Any:
    """A function property, else its Globals value (SAM's inheritance), else None."""
    if name in properties:
        return properties[name]
    return globals_function(template).get(name)


def environment_of(properties: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = (properties.get("Environment") or {}).get("Variables") or {}
    return found


def events_of(
    properties: dict[str, Any], *event_types: str
) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, event in (properties.get("Events") or {}).items():
        if event["Type"] in event_types:
            yield name, event.get("Properties") or {}


def getatt(value: Any) -> tuple[str, str] | None:
    """(logical id, attribute) of a Fn::GetAtt, in either the list or the dotted-string form."""
    if not isinstance(value, dict) or set(value) != {"Fn::GetAtt"}:
        return None
    target = value["Fn::GetAtt"]
    if isinstance(target, str):
        target = target.split(".", 1)
    if not isinstance(target, list) or len(target) != 2:
        return None
    return str(target[0]), str(target[1])


def resolve_number(template: Template, value: Any) -> int | None:
    """An integer property, following a Ref to a parameter's default; None if it cannot."""
    if isinstance(value, dict) and set(value) == {"Ref"}:
        value = parameters(template).get(value["Ref"], {}).get("Default")
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def module_of(root: Path, properties: dict[str, Any]) -> tuple[Path, str]:
    """The source file and the attribute a `Handler: pkg.module.attribute` names."""
    module, _, attribute = str(properties["Handler"]).rpartition(".")
    return root / properties["CodeUri"] / (module.replace(".", "/") + ".py"), attribute


def string_constants(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }


def top_level_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
    return names


def walk_intrinsics(node: Any, where: str) -> Iterator[tuple[str, str, Any]]:
    """Every (location, function name, argument) of Ref / Fn::* below `node`."""
    if isinstance(node, dict):
        if len(node) == 1:
            ((name, argument),) = node.items()
            if name == "Ref" or name.startswith("Fn::"):
                yield where, name, argument
        for key, value in node.items():
            yield from walk_intrinsics(value, f"{where}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from walk_intrinsics(value, f"{where}[{index}]")


def template_blocks(template: Template) -> dict[str, Any]:
    """The template cut into blocks a reference can be reported in: one per resource, etc."""
    document = template.document
    blocks: dict[str, Any] = {"Globals": document.get("Globals") or {}}
    for section in ("Conditions", "Resources", "Outputs"):
        for name, body in (document.get(section) or {}).items():
            blocks[f"{section}.{name}"] = body
    return blocks


def policy_statements(policy: Any) -> list[dict[str, Any]]:
    """Statements of a managed policy's PolicyDocument or of an inline SAM `Statement:` policy."""
    document = policy.get("PolicyDocument", policy) if isinstance(policy, dict) else {}
    statements = document.get("Statement") if isinstance(document, dict) else None
    if isinstance(statements, dict):
        return [statements]
    return list(statements or [])


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def execution_role(function: str) -> dict[str, Any] | None:
    """The role a function names (`Role: !GetAtt X.Arn`); None when SAM generates one."""
    role = TEMPLATE_NOW.resources_of_type(FUNCTION)[function].get("Role")
    if isinstance(role, dict) and "Fn::GetAtt" in role:
        roles: dict[str, dict[str, Any]] = TEMPLATE_NOW.resources_of_type("AWS::IAM::Role")
        return roles[role["Fn::GetAtt"][0]]
    assert role is None, f"{function}: a role the checks cannot read: {role!r}"
    return None


def function_policies(function: str) -> list[Any]:
    """What a function may do: its SAM `Policies`, or its own role's managed and inline ones."""
    role = execution_role(function)
    if role is None:
        return as_list(TEMPLATE_NOW.resources_of_type(FUNCTION)[function].get("Policies") or [])
    return [*as_list(role.get("ManagedPolicyArns") or []), *as_list(role.get("Policies") or [])]


# ---------------------------------------------------------------------------------- checks


def reference_problems(template: Template, block: Any, where: str) -> list[str]:
    """Refs, GetAtts, Sub variables and If conditions in `block` that name nothing declared."""
    names = set(parameters(template)) | set(template.resources) | PSEUDO_PARAMETERS
    declared_conditions = set(conditions(template))
    problems = []
    for location, function, argument in walk_intrinsics(block, where):
        if function == "Ref" and argument not in names:
            problems.append(f"{location}: Ref {argument!r} is no parameter, resource or pseudo")
        elif function == "Fn::GetAtt":
            target = getatt({function: argument})
            if target is None or target[0] not in template.resources:
                problems.append(f"{location}: GetAtt {argument!r} names no resource")
        elif function == "Fn::Sub":
            text, local = (argument, {}) if isinstance(argument, str) else argument
            for variable in SUB_VARIABLE.findall(text):
                if variable.startswith("!"):
                    continue  # ${!Literal} is an escape, not a reference
                head = variable if variable.startswith("AWS::") else variable.split(".", 1)[0]
                if head not in names and head not in local:
                    problems.append(f"{location}: Sub ${{{variable}}} names nothing declared")
        elif function == "Fn::If" and (
            not isinstance(argument, list) or argument[0] not in declared_conditions
        ):
            problems.append(f"{location}: If {argument!r} names no declared condition")
    resource = isinstance(block, dict) and where.startswith("Resources.")
    condition = block.get("Condition") if resource else None
    if condition is not None and condition not in declared_conditions:
        problems.append(f"{where}: Condition {block['Condition']!r} is not declared")
    return problems


def function_runtime_problems(template: Template, name: str) -> list[str]:
    properties = template.resources_of_type(FUNCTION)[name]
    problems = []
    runtime = function_setting(template, properties, "Runtime")
    if runtime != RUNTIME:
        problems.append(f"{name}: Runtime is {runtime!r} (function or Globals), not {RUNTIME}")
    architectures = function_setting(template, properties, "Architectures")
    if architectures != ARCHITECTURES:
        problems.append(f"{name}: Architectures is {architectures!r}, not {ARCHITECTURES}")
    return problems


def function_code_problems(template: Template, name: str, root: Path) -> list[str]:
    properties = template.resources_of_type(FUNCTION)[name]
    code_uri = properties.get("CodeUri")
    if not isinstance(code_uri, str) or not (root / code_uri).is_dir():
        return [f"{name}: CodeUri {code_uri!r} is not a directory of the repository"]
    if "." not in str(properties.get("Handler", "")):
        return [f"{name}: Handler {properties.get('Handler')!r} is not module.attribute"]
    source, attribute = module_of(root, properties)
    if not source.is_file():
        return [f"{name}: Handler {properties['Handler']!r} needs {source.name} in {code_uri}"]
    if attribute not in top_level_names(source):
        return [f"{name}: {code_uri}/{source.name} defines no top-level {attribute!r}"]
    return []


def layer_problems(template: Template, name: str, root: Path) -> list[str]:
    content_uri = template.resources_of_type("AWS::Serverless::LayerVersion")[name].get(
        "ContentUri"
    )
    if not isinstance(content_uri, str) or not (root / content_uri).is_dir():
        return [f"{name}: ContentUri {content_uri!r} is not a directory of the repository"]
    layer = root / content_uri
    problems = []
    if not (layer / "requirements.txt").is_file():
        problems.append(f"{name}: {content_uri} has no requirements.txt")
    if not (layer / "jobstream" / "__init__.py").is_file():
        problems.append(f"{name}: {content_uri} has no jobstream package")
    return problems + layer_build_problems(template, name, root)


def layer_build_problems(template: Template, name: str, root: Path) -> list[str]:
    """The layer is built by its own Makefile (sam's `BuildMethod: makefile`), which ships
    bytecode Lambda can use as it is: level 0 (no -O on Lambda), checked by hash never (the
    sources' mtimes do not survive the zip), for the template's architecture."""
    resource = template.document["Resources"][name]
    metadata = resource.get("Metadata") or {}
    content_uri = resource["Properties"]["ContentUri"]
    if metadata.get("BuildMethod") != "makefile":
        return [f"{name}: BuildMethod is {metadata.get('BuildMethod')!r}, not 'makefile'"]
    makefile = root / content_uri / "Makefile"
    if not makefile.is_file():
        return [f"{name}: BuildMethod makefile needs {content_uri}/Makefile"]
    text = makefile.read_text(encoding="utf-8")
    problems = []
    if not re.search(rf"^build-{name}:", text, re.MULTILINE):
        problems.append(f"{name}: {content_uri}/Makefile has no build-{name} target")
    default = re.search(r"^LAYER_ARCHITECTURE \?= (\S+)$", text, re.MULTILINE)
    architectures = resource["Properties"].get("CompatibleArchitectures")
    wanted = metadata.get("BuildArchitecture")
    if default is None or default.group(1) != wanted or architectures != [wanted]:
        problems.append(
            f"{name}: the Makefile builds for {default and default.group(1)!r}, the template "
            f"says BuildArchitecture {wanted!r} and CompatibleArchitectures {architectures!r}"
        )
    version = re.search(r"^LAYER_PYTHON_VERSION \?= (\S+)$", text, re.MULTILINE)
    runtime = globals_function(template).get("Runtime")
    runtimes = resource["Properties"].get("CompatibleRuntimes")
    if version is None or f"python{version.group(1)}" != runtime or runtimes != [runtime]:
        problems.append(
            f"{name}: the Makefile compiles for Python {version and version.group(1)!r}, the "
            f"functions run {runtime!r}, the layer is compatible with {runtimes!r}"
        )
    compile_lines = [line for line in text.splitlines() if "-m compileall" in line]
    if not compile_lines or any(
        "--invalidation-mode unchecked-hash" not in line or re.search(r"\s-[oO]\b", line)
        for line in compile_lines
    ):
        problems.append(
            f"{name}: the Makefile must compileall with --invalidation-mode unchecked-hash at "
            "optimisation level 0"
        )
    return problems


CRON_FIELDS = (  # (name, lowest, highest, extra characters allowed, names)
    ("minutes", 0, 59, "", ()),
    ("hours", 0, 23, "", ()),
    ("day-of-month", 1, 31, "?LW", ()),
    (
        "month",
        1,
        12,
        "",
        ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"),
    ),
    ("day-of-week", 1, 7, "?L#", ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")),
    ("year", 1970, 2199, "", ()),
)


def _cron_value(text: str, low: int, high: int, names: tuple[str, ...] | list[str]) -> bool:
    if text.upper() in names:
        return True
    return text.isdigit() and low <= int(text) <= high


def _cron_field_ok(field: str, spec: tuple[str, int, int, str, Any]) -> bool:
    _, low, high, extra, names = spec
    if field == "?":
        return "?" in extra
    for part in field.split(","):
        base, slash, step = part.partition("/")
        if slash and not (step.isdigit() and int(step) >= 1):
            return False
        if base == "*":
            continue
        if "L" in extra and base == "L":
            continue
        if "L" in extra and base.endswith("L") and _cron_value(base[:-1], low, high, names):
            continue  # last weekday-of-month form (e.g. 6L)
        if "W" in extra and base.endswith("W") and _cron_value(base[:-1], low, high, names):
            continue
        if "#" in extra and "#" in base:
            day, _, nth = base.partition("#")
            if _cron_value(day, low, high, names) and nth in {"1", "2", "3", "4", "5"}:
                continue
            return False
        start, dash, end = base.partition("-")
        if not _cron_value(start, low, high, names):
            return False
        if dash and not _cron_value(end, low, high, names):
            return False
    return True


def schedule_problem(expression: Any) -> str | None:
    """Why `expression` is not an EventBridge rate(...) or cron(...) expression, or None."""
    if not isinstance(expression, str):
        return f"{expression!r} is not a string"
    rate = re.fullmatch(r"rate\((\d+) (minute|minutes|hour|hours|day|days)\)", expression)
    if rate:
        value, unit = int(rate[1]), rate[2]
        if value < 1:
            return f"{expression}: the rate must be positive"
        if (value == 1) != (not unit.endswith("s")):
            return f"{expression}: use the singular unit for 1 and the plural otherwise"
        return None
    cron = re.fullmatch(r"cron\((.*)\)", expression)
    if not cron:
        return f"{expression!r} is neither rate(N unit) nor cron(...)"
    fields = cron[1].split()
    if len(fields) != len(CRON_FIELDS):
        return f"{expression}: cron needs 6 fields, has {len(fields)}"
    for field, spec in zip(fields, CRON_FIELDS, strict=True):
        if not _cron_field_ok(field, spec):
            return f"{expression}: invalid {spec[0]} field {field!r}"
    if (fields[2] == "?") == (fields[4] == "?"):
        return f"{expression}: exactly one of day-of-month and day-of-week must be '?'"
    return None


def schedules(template: Template) -> list[tuple[str, Any]]:
    found = []
    for name, properties in template.resources_of_type(FUNCTION).items():
        for event, props in events_of(properties, "Schedule"):
            found.append((f"{name}.{event}", props.get("Schedule")))
        for event, props in events_of(properties, "ScheduleV2"):
            found.append((f"{name}.{event}", props.get("ScheduleExpression")))
    return found


def sqs_sources(template: Template) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (name, event, props)
        for name, properties in template.resources_of_type(FUNCTION).items()
        for event, props in events_of(properties, "SQS")
    ]


def sqs_source_problems(
    template: Template, function: str, event: str, props: dict[str, Any]
) -> list[str]:
    where = f"{function}.{event}"
    problems = []
    if "ReportBatchItemFailures" not in (props.get("FunctionResponseTypes") or []):
        problems.append(f"{where}: FunctionResponseTypes lacks ReportBatchItemFailures")
    target = getatt(props.get("Queue"))
    queues = template.resources_of_type(QUEUE)
    if target is None or target[0] not in queues or target[1] != "Arn":
        return [*problems, f"{where}: Queue {props.get('Queue')!r} is no !GetAtt <queue>.Arn"]
    queue = queues[target[0]]
    visibility = resolve_number(template, queue.get("VisibilityTimeout", SQS_DEFAULT_VISIBILITY))
    function_properties = template.resources_of_type(FUNCTION)[function]
    timeout = resolve_number(
        template, function_setting(template, function_properties, "Timeout") or SAM_DEFAULT_TIMEOUT
    )
    if visibility is None or timeout is None:
        problems.append(f"{where}: cannot read {target[0]} visibility or {function} timeout")
    elif visibility < VISIBILITY_FACTOR * timeout:
        problems.append(
            f"{where}: {target[0]} VisibilityTimeout {visibility}s is less than "
            f"{VISIBILITY_FACTOR}x {function} Timeout {timeout}s = {VISIBILITY_FACTOR * timeout}s"
        )
    return problems


def redrive_policy(queue: dict[str, Any]) -> dict[str, Any] | None:
    policy = queue.get("RedrivePolicy")
    if isinstance(policy, str):  # CloudFormation also accepts the JSON text
        policy = json.loads(policy)
    return policy


def redrive_problems(template: Template, name: str) -> list[str]:
    policy = redrive_policy(template.resources_of_type(QUEUE)[name])
    if not isinstance(policy, dict):
        return [f"{name}: RedrivePolicy is not a mapping"]
    problems = []
    target = getatt(policy.get("deadLetterTargetArn"))
    if target is None or target[1] != "Arn" or target[0] not in template.resources_of_type(QUEUE):
        problems.append(
            f"{name}: deadLetterTargetArn {policy.get('deadLetterTargetArn')!r} is no "
            "!GetAtt <queue resource>.Arn"
        )
    count = resolve_number(template, policy.get("maxReceiveCount"))
    if count is None or count < 1:
        problems.append(f"{name}: RedrivePolicy needs a positive maxReceiveCount")
    return problems


def dead_letter_queues(template: Template) -> list[str]:
    found = []
    for properties in template.resources_of_type(QUEUE).values():
        policy = redrive_policy(properties)
        target = getatt(policy.get("deadLetterTargetArn")) if isinstance(policy, dict) else None
        if target is not None:
            found.append(target[0])
    return sorted(set(found))


def alarm_metrics(alarm: dict[str, Any]) -> list[dict[str, Any]]:
    """The metrics an alarm watches: its own, or those of its metric math."""
    if "Metrics" not in alarm:
        return [alarm]
    return [query["MetricStat"]["Metric"] for query in alarm["Metrics"] if "MetricStat" in query]


def alarm_problems(template: Template, dead_letter_queue: str) -> list[str]:
    """A dead-letter queue alarms on each rise of its count (DIFF), not while it stays up: a
    queue still holding the last incident's messages would keep a plain alarm on, and a second
    incident would notify no one."""
    for alarm in template.resources_of_type("AWS::CloudWatch::Alarm").values():
        for metric in alarm_metrics(alarm):
            dimensions = metric.get("Dimensions") or []
            watched = [getatt(d.get("Value")) for d in dimensions if d.get("Name") == "QueueName"]
            expressions = [q.get("Expression", "") for q in alarm.get("Metrics") or []]
            if (
                metric.get("Namespace") == "AWS/SQS"
                and metric.get("MetricName") == "ApproximateNumberOfMessagesVisible"
                and (dead_letter_queue, "QueueName") in watched
                and any(e.startswith("DIFF(") for e in expressions)
            ):
                return []
    return [
        (
            f"{dead_letter_queue}: no alarm on the rise (DIFF) of AWS/SQS "
            f"ApproximateNumberOfMessagesVisible with QueueName = !GetAtt "
            f"{dead_letter_queue}.QueueName"
        )
    ]


def environment_blocks(template: Template) -> dict[str, dict[str, Any]]:
    blocks = {"Globals": environment_of(globals_function(template))}
    for name, properties in template.resources_of_type(FUNCTION).items():
        blocks[name] = environment_of(properties)
    return blocks


def environment_problems(variables: dict[str, Any], where: str) -> list[str]:
    return [
        f"{where}: {variable} is neither a settings variable (settings.ENVIRONMENT) nor in "
        "READ_ELSEWHERE or READ_BY_DEPENDENCIES"
        for variable in variables
        if variable not in SETTING_VARIABLES
        and variable not in READ_ELSEWHERE
        and variable not in READ_BY_DEPENDENCIES
    ]


def http_routes(template: Template) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(function, METHOD, path, function properties) of every HttpApi event."""
    return [
        (name, str(props.get("Method", "")).upper(), str(props.get("Path", "")), properties)
        for name, properties in template.resources_of_type(FUNCTION).items()
        for _, props in events_of(properties, "HttpApi")
    ]


def route_problems(
    function: str, method: str, path: str, properties: dict[str, Any], root: Path
) -> list[str]:
    source, _ = module_of(root, properties)
    if not source.is_file():
        return [f"{function}: no handler module {source.name} for {method} {path}"]
    if path == "$default":
        # The unknown-route answer comes from http_handler's fallback, not a route-table entry.
        if "http_handler" not in top_level_names(source):
            return [f"{function}: serves $default but its handler is not built by http_handler"]
        return []
    key = f"{method} {path}"
    if key not in string_constants(source):
        return [f"{function}: {properties['CodeUri']}/{source.name} has no route {key!r}"]
    return []


def declared_route_keys(source: Path) -> set[str]:
    """The keys of the dict literals passed to http_handler(...) in a function module: its
    routes, and its `cacheable` routes (authenticated like them)."""
    tree = ast.parse(source.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "http_handler"
        ):
            continue
        tables = node.args[:1] + [k.value for k in node.keywords if k.arg == "cacheable"]
        for table in tables:
            if isinstance(table, ast.Dict):
                found |= {
                    k.value
                    for k in table.keys
                    if isinstance(k, ast.Constant) and isinstance(k.value, str)
                }
    return found


def looks_like_secret(value: Any) -> bool:
    text = str(value)
    return (
        text.startswith("whsec_")
        or re.search(r"\w=\S{6,}", text) is not None  # tenant=token pairs
        or (
            re.fullmatch(r"[A-Za-z0-9+/=_\-]{20,}", text) is not None
            and re.search(r"[A-Za-z]", text) is not None
            and re.search(r"\d", text) is not None
        )
    )


def table_problems(template: Template, name: str) -> list[str]:
    table = template.tables()[name]  # as the default parameters deploy it
    problems = []
    if table.get("BillingMode") != "PAY_PER_REQUEST":
        problems.append(f"{name}: BillingMode is {table.get('BillingMode')!r}")
    recovery = table.get("PointInTimeRecoverySpecification") or {}
    if recovery.get("PointInTimeRecoveryEnabled") is not True:
        problems.append(f"{name}: point-in-time recovery is not enabled")
    ttl = table.get("TimeToLiveSpecification") or {}
    if ttl.get("Enabled") is not True or ttl.get("AttributeName") != keys.TTL_ATTRIBUTE:
        problems.append(f"{name}: TTL must be enabled on {keys.TTL_ATTRIBUTE!r}, is {ttl!r}")
    defined = {a["AttributeName"] for a in table.get("AttributeDefinitions") or []}
    table_keys = [k["AttributeName"] for k in table.get("KeySchema") or []]
    if table_keys != [keys.PK, keys.SK]:
        problems.append(f"{name}: KeySchema is {table_keys}, the store uses [{keys.PK}, {keys.SK}]")
    indexes = {i["IndexName"]: i for i in table.get("GlobalSecondaryIndexes") or []}
    problems += [
        f"{name}: no GSI {index!r} (jobstream.store.keys uses it)"
        for index in TABLE_INDEXES
        if index not in indexes
    ]
    problems += [
        f"{name}: GSI {index_name} key {key['AttributeName']!r} is not in AttributeDefinitions"
        for index_name, index in indexes.items()
        for key in index.get("KeySchema") or []
        if key["AttributeName"] not in defined
    ]
    problems += [
        f"{name}: table key {key!r} is not in AttributeDefinitions"
        for key in table_keys
        if key not in defined
    ]
    return problems


def table_policies(template: Template) -> set[str]:
    """Managed policies whose statements reach a DynamoDB table of the template."""
    tables = set(template.resources_of_type("AWS::DynamoDB::Table"))
    found = set()
    for name, policy in template.resources_of_type("AWS::IAM::ManagedPolicy").items():
        for _, function, argument in walk_intrinsics(policy, name):
            target = getatt({function: argument}) if function == "Fn::GetAtt" else None
            if target is not None and target[0] in tables:
                found.add(name)
            if function == "Fn::Sub":
                text = argument if isinstance(argument, str) else argument[0]
                if {v.split(".", 1)[0] for v in SUB_VARIABLE.findall(text)} & tables:
                    found.add(name)
    return found


def wildcard_problems(statements: list[dict[str, Any]], where: str) -> list[str]:
    problems = []
    for statement in statements:
        if statement.get("Effect") == "Allow" and "NotAction" in statement:
            problems.append(f"{where}: an Allow statement uses NotAction")
        for action in as_list(statement.get("Action") or []):
            text = str(action).lower()
            if text == "*" or (text.startswith("dynamodb:") and "*" in text):
                problems.append(f"{where}: grants {action!r}")
    return problems


# ---------------------------------------------------------------------------------- tests

TEMPLATE_NOW = Template.load()
FUNCTIONS = sorted(TEMPLATE_NOW.resources_of_type(FUNCTION))
LAYERS = sorted(TEMPLATE_NOW.resources_of_type("AWS::Serverless::LayerVersion"))
QUEUES_WITH_REDRIVE = sorted(
    name
    for name, properties in TEMPLATE_NOW.resources_of_type(QUEUE).items()
    if "RedrivePolicy" in properties
)
TABLES = sorted(TEMPLATE_NOW.resources_of_type("AWS::DynamoDB::Table"))
ROUTES = http_routes(TEMPLATE_NOW)


def test_template_has_what_the_checks_walk() -> None:
    """Guard against the parametrized tests passing by collecting nothing."""
    assert FUNCTIONS, "no AWS::Serverless::Function in template.yaml"
    assert LAYERS, "no AWS::Serverless::LayerVersion in template.yaml"
    assert TABLES, "no AWS::DynamoDB::Table in template.yaml"
    assert sqs_sources(TEMPLATE_NOW), "no SQS event sources in template.yaml"
    assert schedules(TEMPLATE_NOW), "no Schedule / ScheduleV2 events in template.yaml"
    assert QUEUES_WITH_REDRIVE, "no queue with a RedrivePolicy in template.yaml"


@pytest.mark.parametrize("block", sorted(template_blocks(TEMPLATE_NOW)))
def test_references_name_declared_things(block: str) -> None:
    problems = reference_problems(TEMPLATE_NOW, template_blocks(TEMPLATE_NOW)[block], block)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("function", FUNCTIONS)
def test_function_runs_python313_on_arm64(function: str) -> None:
    problems = function_runtime_problems(TEMPLATE_NOW, function)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("function", FUNCTIONS)
def test_function_handler_exists_in_code_uri(function: str) -> None:
    problems = function_code_problems(TEMPLATE_NOW, function, REPOSITORY)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("layer", LAYERS)
def test_layer_content_has_requirements_and_package(layer: str) -> None:
    problems = layer_problems(TEMPLATE_NOW, layer, REPOSITORY)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(("event", "expression"), schedules(TEMPLATE_NOW))
def test_schedule_expression_is_valid(event: str, expression: Any) -> None:
    problem = schedule_problem(expression)
    assert problem is None, f"{event}: {problem}"


@pytest.mark.parametrize(
    "expression",
    [
        "rate(1 minute)",
        "rate(5 minutes)",
        "rate(1 day)",
        "cron(0 12 * * ? *)",
        "cron(15 10 ? * 6L 2022-2030)",
        "cron(0/5 8-17 ? * MON-FRI *)",
        "cron(0 9 ? * 2#1 *)",
    ],
)
def test_schedule_checker_accepts(expression: str) -> None:
    assert schedule_problem(expression) is None


@pytest.mark.parametrize(
    "expression",
    [
        "rate(0 minutes)",
        "rate(1 minutes)",
        "rate(5 minute)",
        "rate(5 seconds)",
        "every minute",
        "cron(* * * * *)",
        "cron(0 12 * * * *)",
        "cron(0 12 ? * ? *)",
        "cron(60 12 * * ? *)",
        "cron(0 24 * * ? *)",
        "cron(0 12 * 13 ? *)",
    ],
)
def test_schedule_checker_rejects(expression: str) -> None:
    assert schedule_problem(expression) is not None


@pytest.mark.parametrize(
    ("function", "event", "props"),
    sqs_sources(TEMPLATE_NOW),
    ids=[f"{f}.{e}" for f, e, _ in sqs_sources(TEMPLATE_NOW)],
)
def test_sqs_source_reports_failures_and_outlives_the_function(
    function: str, event: str, props: dict[str, Any]
) -> None:
    problems = sqs_source_problems(TEMPLATE_NOW, function, event, props)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("queue", QUEUES_WITH_REDRIVE)
def test_redrive_policy_targets_a_queue_with_a_receive_count(queue: str) -> None:
    problems = redrive_problems(TEMPLATE_NOW, queue)
    assert not problems, "\n".join(problems)


def test_the_callbacks_function_knows_when_the_queue_would_dead_letter_a_message() -> None:
    from jobstream.service.callbacks import QUEUE_MAX_RECEIVES

    policy = redrive_policy(TEMPLATE_NOW.resources_of_type(QUEUE)["CallbackQueue"])
    assert isinstance(policy, dict)
    assert resolve_number(TEMPLATE_NOW, policy["maxReceiveCount"]) == QUEUE_MAX_RECEIVES


@pytest.mark.parametrize("dead_letter_queue", dead_letter_queues(TEMPLATE_NOW))
def test_dead_letter_queue_has_a_visible_messages_alarm(dead_letter_queue: str) -> None:
    problems = alarm_problems(TEMPLATE_NOW, dead_letter_queue)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("where", sorted(environment_blocks(TEMPLATE_NOW)))
def test_environment_variables_are_settings_or_read_elsewhere(where: str) -> None:
    problems = environment_problems(environment_blocks(TEMPLATE_NOW)[where], where)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(("variable", "source"), sorted(READ_ELSEWHERE.items()))
def test_allow_listed_variable_is_read_where_claimed(variable: str, source: str) -> None:
    path = REPOSITORY / source
    assert path.is_file(), f"{source} (said to read {variable}) does not exist"
    assert variable in string_constants(path), f"{source} has no string literal {variable!r}"


@pytest.mark.parametrize(("variable", "module"), sorted(READ_BY_DEPENDENCIES.items()))
def test_a_dependency_variable_is_read_by_that_dependency(variable: str, module: str) -> None:
    spec = importlib.util.find_spec(module)
    assert spec is not None
    assert spec.origin is not None, f"{module} is not installed"
    assert variable in string_constants(Path(spec.origin)), f"{module} no longer reads {variable}"


def test_pydantic_looks_for_no_plugin_with_the_template_s_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    value = environment_of(globals_function(TEMPLATE_NOW))["PYDANTIC_DISABLE_PLUGINS"]
    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", value)
    monkeypatch.setattr(_loader, "_plugins", None)

    def scanned(**_kwargs: Any) -> list[Any]:
        raise AssertionError("the installed distributions were scanned for plugins")

    monkeypatch.setattr(_loader, "entry_points", scanned)
    assert list(_loader.get_plugins()) == []


@pytest.mark.parametrize(
    "variable", sorted(SETTING_VARIABLES - PER_FUNCTION_SETTINGS - LOCAL_ONLY_SETTINGS)
)
def test_setting_variable_is_set_in_globals(variable: str) -> None:
    globals_environment = environment_of(globals_function(TEMPLATE_NOW))
    assert variable in globals_environment, (
        f"{variable} (settings.ENVIRONMENT) is not set in Globals.Function.Environment, "
        "so AWS and the local stack would read different names"
    )


@pytest.mark.parametrize(
    ("function", "method", "path", "properties"),
    ROUTES,
    ids=[f"{m} {p}" for _, m, p, _ in ROUTES],
)
def test_http_route_is_served_by_its_function(
    function: str, method: str, path: str, properties: dict[str, Any]
) -> None:
    problems = route_problems(function, method, path, properties, REPOSITORY)
    assert not problems, "\n".join(problems)


def test_http_api_has_a_default_route_and_no_duplicate_routes() -> None:
    route_keys = [path if path == "$default" else f"{m} {path}" for _, m, path, _ in ROUTES]
    assert "$default" in route_keys, "no HttpApi event with Path: $default (unknown routes)"
    duplicates = sorted({k for k in route_keys if route_keys.count(k) > 1})
    assert not duplicates, f"route keys declared more than once: {duplicates}"


@pytest.mark.parametrize("function", sorted({f for f, _, _, _ in ROUTES}))
def test_function_route_table_entries_are_all_routed(function: str) -> None:
    properties = TEMPLATE_NOW.resources_of_type(FUNCTION)[function]
    source, _ = module_of(REPOSITORY, properties)
    routed = {f"{m} {p}" for f, m, p, _ in ROUTES if f == function}
    unrouted = sorted(declared_route_keys(source) - routed)
    assert not unrouted, f"{function}: route table keys without an HttpApi event: {unrouted}"


def test_no_parameter_carries_a_secret() -> None:
    """Secrets live in the tenants secret, read at run time: no NoEcho parameter, since its
    value would become a plain environment variable of every function."""
    secret = [name for name, p in parameters(TEMPLATE_NOW).items() if p.get("NoEcho")]
    assert not secret, f"NoEcho parameters (secrets in the environment): {secret}"


@pytest.mark.parametrize("where", sorted(environment_blocks(TEMPLATE_NOW)))
def test_no_environment_holds_a_secret(where: str) -> None:
    variables = environment_blocks(TEMPLATE_NOW)[where]
    assert not SECRET_VARIABLES & set(variables), sorted(SECRET_VARIABLES & set(variables))
    values = [v for v in variables.values() if isinstance(v, str) and looks_like_secret(v)]
    assert not values, f"{where}: values that look like secrets: {values}"


def test_the_registry_is_a_secret_read_at_run_time() -> None:
    secrets = TEMPLATE_NOW.resources_of_type("AWS::SecretsManager::Secret")
    assert set(secrets) == {"TenantsSecret"}
    resource = TEMPLATE_NOW.resources["TenantsSecret"]
    # Deleting or replacing the stack must not lose every consumer's credentials.
    assert resource.get("DeletionPolicy") == "Retain"
    assert resource.get("UpdateReplacePolicy") == "Retain"
    # The initial value is an empty registry, valid for the functions' parser.
    from jobstream.config.tenants import parse_registry

    assert parse_registry(secrets["TenantsSecret"]["SecretString"]).tenants == {}
    globals_environment = environment_of(globals_function(TEMPLATE_NOW))
    assert globals_environment["JOBSTREAM_TENANTS_SECRET"] == ADOPTABLE_SECRET
    assert resource["Condition"] == "CreatesTenantsSecret"


def test_the_registry_policy_reads_exactly_the_tenants_secret() -> None:
    policy = TEMPLATE_NOW.resources_of_type("AWS::IAM::ManagedPolicy")["TenantsReadPolicy"]
    (statement,) = policy_statements(policy)
    assert statement["Effect"] == "Allow"
    assert as_list(statement["Action"]) == ["secretsmanager:GetSecretValue"]
    assert statement["Resource"] == ADOPTABLE_SECRET


@pytest.mark.parametrize("function", FUNCTIONS)
def test_only_the_functions_that_read_the_registry_may(function: str) -> None:
    policies = function_policies(function)
    referenced = {p["Ref"] for p in policies if isinstance(p, dict) and "Ref" in p}
    assert ("TenantsReadPolicy" in referenced) == (function in REGISTRY_READERS), function
    inline = [s for p in policies for s in policy_statements(p)]
    tenants_grants = [
        s for s in inline if "TenantsSecret" in str(s.get("Resource")) or s.get("Resource") == "*"
    ]
    assert not tenants_grants, f"{function}: an inline grant reaches the tenants secret"


@pytest.mark.parametrize("parameter", sorted(parameters(TEMPLATE_NOW)))
def test_parameter_default_does_not_look_like_a_secret(parameter: str) -> None:
    default = parameters(TEMPLATE_NOW)[parameter].get("Default")
    assert default is None or not looks_like_secret(default), (
        f"{parameter} Default {default!r} looks like a secret"
    )


@pytest.mark.parametrize("table", TABLES)
def test_table_is_on_demand_recoverable_with_ttl_and_store_indexes(table: str) -> None:
    problems = table_problems(TEMPLATE_NOW, table)
    assert not problems, "\n".join(problems)


def test_table_policy_covers_table_and_indexes() -> None:
    policies = table_policies(TEMPLATE_NOW)
    assert len(policies) == 1, f"expected one managed policy on the table, found {policies}"
    (policy,) = policies
    resources: list[Any] = []
    for statement in policy_statements(
        TEMPLATE_NOW.resources_of_type("AWS::IAM::ManagedPolicy")[policy]
    ):
        resources += as_list(statement.get("Resource") or [])
    for table in TABLES:
        assert {"Fn::GetAtt": [table, "Arn"]} in resources, f"{policy} does not cover {table}"
        assert {"Fn::Sub": f"${{{table}.Arn}}/index/*"} in resources, (
            f"{policy} does not cover {table}'s indexes"
        )


# How a DynamoDB call of the store is authorised: the API call's own action, or, inside a
# transaction, the action of each kind of item it writes or checks.
CALL_ACTIONS = {
    "get_item": "GetItem",
    "put_item": "PutItem",
    "update_item": "UpdateItem",
    "delete_item": "DeleteItem",
    "query": "Query",
    "scan": "Scan",
    "batch_get_item": "BatchGetItem",
    "batch_write_item": "BatchWriteItem",
    "transact_get_items": "GetItem",
}
TRANSACTION_ITEM_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
}
STORE = REPOSITORY / "layers" / "jobstream" / "jobstream" / "store"


def store_table_actions() -> set[str]:
    """The IAM actions the store's code needs: the DynamoDB client calls it makes and the item
    kinds of its transactions (the store is the only DynamoDB user)."""
    needed: set[str] = set()
    for path in STORE.glob("*.py"):
        source = path.read_text(encoding="utf-8")
        # A call made through `call_built` (store/client.py) names its operation.
        built = re.findall(r'call_built\(\s*self\.client,\s*"([a-z_]+)"', source)
        for call in [*re.findall(r"client\.([a-z_]+)\(", source), *built]:
            assert call in CALL_ACTIONS or call == "transact_write_items", (
                f"{path.name}: client.{call} has no action mapped here"
            )
            needed.add(CALL_ACTIONS.get(call, ""))
        needed |= {
            TRANSACTION_ITEM_ACTIONS[kind]
            for kind in re.findall(r'"(Put|Update|Delete|ConditionCheck)": \{', source)
        }
    return needed - {""}


def test_table_policy_grants_exactly_the_actions_the_store_uses() -> None:
    """Least privilege both ways: a call the policy lacks fails on AWS only (moto checks no
    IAM), and an action nothing uses is a grant too many."""
    (policy,) = table_policies(TEMPLATE_NOW)
    granted = {
        str(action).removeprefix("dynamodb:")
        for statement in policy_statements(
            TEMPLATE_NOW.resources_of_type("AWS::IAM::ManagedPolicy")[policy]
        )
        for action in as_list(statement.get("Action") or [])
    }
    needed = store_table_actions()
    assert "GetItem" in needed
    assert "UpdateItem" in needed
    assert granted == needed, f"grant {sorted(needed - granted)}, drop {sorted(granted - needed)}"


# The dispatcher reads the table's stream (its event source grants that), never the table.
STREAM_ONLY = {"DispatcherFunction"}
# Who may send to the work and callback queues: the dispatcher (after every commit) and the
# sweep (its re-sends). No request path and no worker waits for SQS.
QUEUE_SENDERS = {"DispatcherFunction", "ReconcileFunction"}


def referenced_policies(function: str) -> set[str]:
    return {p["Ref"] for p in function_policies(function) if isinstance(p, dict) and "Ref" in p}


@pytest.mark.parametrize("function", FUNCTIONS)
def test_function_policies_include_table_policy(function: str) -> None:
    expected = table_policies(TEMPLATE_NOW)
    if function in STREAM_ONLY:
        assert not referenced_policies(function) & expected, f"{function} needs no table access"
        return
    assert referenced_policies(function) & expected, (
        f"{function}: Policies lacks !Ref to one of {sorted(expected)}"
    )


@pytest.mark.parametrize("function", FUNCTIONS)
def test_only_the_dispatcher_and_the_sweep_send_to_the_queues(function: str) -> None:
    assert ("QueueSendPolicy" in referenced_policies(function)) == (function in QUEUE_SENDERS)


def test_the_dispatcher_reads_the_tables_stream() -> None:
    table = TEMPLATE_NOW.resources_of_type("AWS::DynamoDB::Table")["JobsTable"]
    assert table["StreamSpecification"] == {"StreamViewType": "NEW_IMAGE"}
    events = TEMPLATE_NOW.resources_of_type(FUNCTION)["DispatcherFunction"]["Events"]
    (source,) = [event["Properties"] for event in events.values() if event["Type"] == "DynamoDB"]
    assert source["Stream"] == {"Fn::GetAtt": ["JobsTable", "StreamArn"]}
    assert source["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert source["MaximumBatchingWindowInSeconds"] == 0
    assert len(source["FilterCriteria"]["Filters"]) == 2


def test_the_dispatcher_may_read_this_tables_stream_and_no_other() -> None:
    """SAM would give a stream trigger AWS's AWSLambdaDynamoDBExecutionRole (every stream in the
    account); the dispatcher names its own role, so SAM generates none and attaches nothing."""
    function = TEMPLATE_NOW.resources_of_type(FUNCTION)["DispatcherFunction"]
    assert "Policies" not in function, "SAM ignores Policies beside Role: they would grant nothing"
    role = execution_role("DispatcherFunction")
    assert role is not None
    assert role["AssumeRolePolicyDocument"]["Statement"] == [
        {
            "Effect": "Allow",
            "Principal": {"Service": "lambda.amazonaws.com"},
            "Action": "sts:AssumeRole",
        }
    ]
    managed = role["ManagedPolicyArns"]
    assert managed[0] == {"Ref": "QueueSendPolicy"}
    # AWS's X-Ray writer, only when tracing is on (SAM adds it to the roles it generates).
    assert managed[1]["Fn::If"][0] == "TracingEnabled"
    assert "AWSXrayWriteOnlyAccess" in str(managed[1]["Fn::If"][1])
    assert len(managed) == 2
    grants = {
        (action, json.dumps(statement["Resource"], sort_keys=True))
        for policy in role["Policies"]
        for statement in policy_statements(policy)
        for action in as_list(statement["Action"])
    }
    stream = json.dumps({"Fn::Sub": "${JobsTable.Arn}/stream/*"})
    log_group = json.dumps({"Fn::GetAtt": ["DispatcherLogGroup", "Arn"]}, sort_keys=True)
    assert grants == {
        *(
            (f"dynamodb:{action}", stream)
            for action in ("DescribeStream", "GetRecords", "GetShardIterator", "ListStreams")
        ),
        ("logs:CreateLogStream", log_group),
        ("logs:PutLogEvents", log_group),
        ("sqs:SendMessage", json.dumps({"Fn::GetAtt": ["StreamFailureQueue", "Arn"]})),
    }
    assert function["LoggingConfig"]["LogGroup"] == {"Ref": "DispatcherLogGroup"}


@pytest.mark.parametrize(
    "where",
    sorted(TEMPLATE_NOW.resources_of_type("AWS::IAM::ManagedPolicy")) + FUNCTIONS,
)
def test_no_policy_grants_wildcard_actions(where: str) -> None:
    managed = TEMPLATE_NOW.resources_of_type("AWS::IAM::ManagedPolicy")
    if where in managed:
        statements = policy_statements(managed[where])
    else:
        statements = [s for p in function_policies(where) for s in policy_statements(p)]
    problems = wildcard_problems(statements, where)
    assert not problems, "\n".join(problems)


# ------------------------------------------------------- the checks fail on a broken template


def edited(tmp_path: Path, old: str, new: str) -> Template:
    """A copy of template.yaml with every `old` replaced by `new`, loaded."""
    text = TEMPLATE.read_text(encoding="utf-8")
    assert old in text, f"the edit needs {old!r} in template.yaml"
    copy = tmp_path / "template.yaml"
    copy.write_text(text.replace(old, new), encoding="utf-8")
    return Template.load(copy)


def all_reference_problems(template: Template) -> list[str]:
    return [
        problem
        for block, body in template_blocks(template).items()
        for problem in reference_problems(template, body, block)
    ]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("!Ref TableAccessPolicy", "!Ref TablePolicy", "Ref 'TablePolicy'"),
        ("!GetAtt WorkQueue.Arn", "!GetAtt WorkQ.Arn", "GetAtt ['WorkQ', 'Arn']"),
        ("${AWS::URLSuffix}", "${AWS::UrlSuffix}", "Sub ${AWS::UrlSuffix}"),
        ('"${JobsTable.Arn}/index/*"', '"${Jobs.Arn}/index/*"', "Sub ${Jobs.Arn}"),
        ("!If [HasAlarmTopic,", "!If [HasTopic,", "If ['HasTopic'"),
    ],
    ids=["Ref", "GetAtt", "Sub-pseudo", "Sub-attribute", "If"],
)
def test_reference_check_catches(tmp_path: Path, old: str, new: str, expected: str) -> None:
    problems = all_reference_problems(edited(tmp_path, old, new))
    assert any(expected in problem for problem in problems), problems


def test_visibility_check_catches_a_short_queue(tmp_path: Path) -> None:
    template = edited(tmp_path, "VisibilityTimeout: 180", "VisibilityTimeout: 179")
    problems = [
        p
        for f, e, props in sqs_sources(template)
        for p in sqs_source_problems(template, f, e, props)
    ]
    assert any("CallbackQueue VisibilityTimeout 179s" in p for p in problems), problems


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("BuildMethod: makefile", "BuildMethod: python3.11", "not 'makefile'"),
        ("BuildArchitecture: arm64", "BuildArchitecture: x86_64", "the Makefile builds for"),
    ],
    ids=["build-method", "architecture"],
)
def test_layer_build_check_catches(tmp_path: Path, old: str, new: str, expected: str) -> None:
    template = edited(tmp_path, old, new)
    problems = [p for layer in LAYERS for p in layer_build_problems(template, layer, REPOSITORY)]
    assert any(expected in problem for problem in problems), problems


def test_layer_build_check_catches_stale_bytecode_settings(tmp_path: Path) -> None:
    layer = tmp_path / "layers" / "jobstream"
    layer.mkdir(parents=True)
    makefile = (REPOSITORY / "layers" / "jobstream" / "Makefile").read_text(encoding="utf-8")
    assert "--invalidation-mode unchecked-hash" in makefile
    (layer / "Makefile").write_text(
        makefile.replace("--invalidation-mode unchecked-hash", "-o 2"), encoding="utf-8"
    )
    problems = [p for name in LAYERS for p in layer_build_problems(TEMPLATE_NOW, name, tmp_path)]
    assert any("unchecked-hash" in problem for problem in problems), problems


def test_handler_check_catches_a_missing_attribute(tmp_path: Path) -> None:
    template = edited(
        tmp_path,
        "CodeUri: functions/ack\n      Handler: app.handler",
        "CodeUri: functions/ack\n      Handler: app.main",
    )
    assert function_code_problems(template, "AckFunction", REPOSITORY) == [
        "AckFunction: functions/ack/app.py defines no top-level 'main'"
    ]


def test_route_check_catches_a_route_the_function_lacks(tmp_path: Path) -> None:
    template = edited(tmp_path, "Path: /jobs/{job_id}/events\n", "Path: /jobs/{job_id}/stream\n")
    problems = [
        p
        for f, m, path, props in http_routes(template)
        for p in route_problems(f, m, path, props, REPOSITORY)
    ]
    assert problems == [
        "EventsFunction: functions/events/app.py has no route 'GET /jobs/{job_id}/stream'"
    ]


def test_environment_check_catches_an_unknown_variable(tmp_path: Path) -> None:
    template = edited(
        tmp_path, 'JOBSTREAM_SWEEP_BUDGET_MS: "45000"', 'JOBSTREAM_SWEEP_BUDGET: "45000"'
    )
    assert environment_problems(
        environment_blocks(template)["ReconcileFunction"], "ReconcileFunction"
    )


def test_alarm_check_catches_an_unwatched_dead_letter_queue(tmp_path: Path) -> None:
    template = edited(
        tmp_path,
        "Value: !GetAtt CallbackDeadLetterQueue.QueueName",
        "Value: !GetAtt CallbackQueue.QueueName",
    )
    assert alarm_problems(template, "CallbackDeadLetterQueue")


def test_wildcard_check_catches_dynamodb_star(tmp_path: Path) -> None:
    template = edited(tmp_path, "- dynamodb:GetItem\n", "- dynamodb:*\n")
    policy = template.resources_of_type("AWS::IAM::ManagedPolicy")["TableAccessPolicy"]
    assert wildcard_problems(policy_statements(policy), "TableAccessPolicy") == [
        "TableAccessPolicy: grants 'dynamodb:*'"
    ]


def test_the_sam_local_env_file_points_every_queue_and_the_table_at_the_local_stack() -> None:
    """`sam local` passes only variables the template declares; each must be one of them, and
    the resource names must be the ones the local stack creates."""
    import json

    from jobstream_local.template import Template as LocalTemplate

    template = LocalTemplate.load()
    env_file = Path(__file__).resolve().parents[2] / "local" / "sam-env.json"
    parameters = json.loads(env_file.read_text(encoding="utf-8"))["Parameters"]
    declared = template.document["Globals"]["Function"]["Environment"]["Variables"]
    for name in parameters:
        assert name in declared or name.startswith("AWS_"), f"{name} is not declared"
    for variable, logical_id in (
        ("JOBSTREAM_TABLE", "JobsTable"),
        ("JOBSTREAM_WORK_QUEUE_URL", "WorkQueue"),
        ("JOBSTREAM_CALLBACK_QUEUE_URL", "CallbackQueue"),
        ("JOBSTREAM_CALLBACK_DLQ_URL", "CallbackDeadLetterQueue"),
        ("JOBSTREAM_TENANTS_SECRET", "TenantsSecret"),
    ):
        assert parameters[variable].endswith(template.physical_name(logical_id)), variable


def test_the_outputs_give_the_operator_cli_what_the_functions_get() -> None:
    # Every resource the functions reach through their environment (table, queues) is an Output,
    # so an operator can give the CLI what the functions get (docs/deploy.md).
    template = TEMPLATE_NOW
    outputs = template.document["Outputs"]
    variables = template.document["Globals"]["Function"]["Environment"]["Variables"]
    by_ref = {
        output["Value"]["Ref"]: output for output in outputs.values() if "Ref" in output["Value"]
    }
    resource_variables = {
        name: value["Ref"]
        for name, value in variables.items()
        if isinstance(value, dict) and value.get("Ref") in template.resources
    }
    assert set(resource_variables) >= {"JOBSTREAM_TABLE", "JOBSTREAM_CALLBACK_DLQ_URL"}
    for variable, resource in resource_variables.items():
        assert resource in by_ref, f"no Output for {resource} ({variable})"
    assert "ApiUrl" in outputs
    assert "execute-api" in outputs["ApiUrl"]["Value"]["Fn::Sub"]


# ------------------------------------------ Lambda and API limits (issue 13 item 11, capacity)

LOG_GROUP = "AWS::Logs::LogGroup"
HTTP_API = "AWS::Serverless::HttpApi"
LAMBDA_MAX_TIMEOUT_S = 900


def ref(value: Any) -> str | None:
    return str(value["Ref"]) if isinstance(value, dict) and set(value) == {"Ref"} else None


def log_group_problems(template: Template, group: str | None, where: str) -> list[str]:
    groups = template.resources_of_type(LOG_GROUP)
    if group is None or group not in groups:
        return [f"{where}: no AWS::Logs::LogGroup of the template ({group!r})"]
    retention = resolve_number(template, groups[group].get("RetentionInDays"))
    if retention is None or retention < 1:
        return [f"{where}: log group {group} keeps its logs forever (no RetentionInDays)"]
    return []


def function_log_problems(template: Template, function: str) -> list[str]:
    """Each function logs to a log group of its own with a retention (not Lambda's default
    group, which keeps logs forever and which CloudFormation cannot own)."""
    properties = template.resources_of_type(FUNCTION)[function]
    group = ref((properties.get("LoggingConfig") or {}).get("LogGroup"))
    return log_group_problems(template, group, f"{function}.LoggingConfig.LogGroup")


def http_api_problems(template: Template, name: str) -> list[str]:
    api = template.resources_of_type(HTTP_API)[name]
    problems = []
    access = api.get("AccessLogSettings") or {}
    target = getatt(access.get("DestinationArn"))
    problems += log_group_problems(
        template, target[0] if target and target[1] == "Arn" else None, f"{name} access logs"
    )
    log_format = str(access.get("Format", ""))
    for field in ("$context.requestId", "$context.status", "$context.routeKey"):
        if field not in log_format:
            problems.append(f"{name}: the access log format lacks {field}")
    try:
        json.loads(log_format.replace("$context.", "context_"))
    except ValueError:
        problems.append(f"{name}: the access log format is not one JSON object per line")
    throttling = api.get("DefaultRouteSettings") or {}
    for setting in ("ThrottlingRateLimit", "ThrottlingBurstLimit"):
        value = resolve_number(template, throttling.get(setting))
        if value is None or value < 1:
            problems.append(f"{name}: DefaultRouteSettings.{setting} is not a positive number")
    return problems


def queue_scaling_problems(template: Template) -> list[str]:
    """Every queue trigger has a concurrency cap (2-1000, SQS's bounds): the worker's keeps jobs
    from taking the account, the callbacks' keeps receivers that hang from taking it."""
    problems = []
    for function, event, props in sqs_sources(template):
        cap = resolve_number(template, (props.get("ScalingConfig") or {}).get("MaximumConcurrency"))
        if cap is None or not 2 <= cap <= 1000:
            problems.append(
                f"{function}.{event}: the queue trigger's MaximumConcurrency is {cap!r}"
            )
    return problems


def reserved_concurrency_problems(template: Template) -> list[str]:
    """The four HTTP functions reserve `ApiReservedConcurrency` each when it is not 0."""
    expected = {
        "Fn::If": [
            "ReservesApiConcurrency",
            {"Ref": "ApiReservedConcurrency"},
            {"Ref": "AWS::NoValue"},
        ]
    }
    return [
        f"{name}: ReservedConcurrentExecutions is not the ApiReservedConcurrency parameter"
        for name in HTTP_FUNCTIONS
        if template.resources_of_type(FUNCTION)[name].get("ReservedConcurrentExecutions")
        != expected
    ]


def schedule_name_problems(template: Template) -> list[str]:
    """A schedule's name is unique per account and region: a fixed one (SAM's default is the
    logical id) lets a second stack take over the first one's sweep."""
    return [
        f"{function}.{event}: set OmitName: true (and no Name) for a generated name"
        for function, properties in template.resources_of_type(FUNCTION).items()
        for event, props in events_of(properties, "ScheduleV2")
        if props.get("OmitName") is not True or "Name" in props
    ]


def condition_value(template: Template, node: Any, parameters_now: dict[str, str]) -> Any:
    """A condition or intrinsic evaluated for given parameter values (the subset used here)."""
    if isinstance(node, dict) and len(node) == 1:
        ((name, argument),) = node.items()
        if name == "Ref":
            return parameters_now[argument]
        if name in {"Condition", "Fn::Condition"}:
            return condition_value(template, conditions(template)[argument], parameters_now)
        if name == "Fn::Equals":
            left, right = (condition_value(template, a, parameters_now) for a in argument)
            return left == right
        if name == "Fn::Not":
            return not condition_value(template, argument[0], parameters_now)
        if name == "Fn::And":
            return all(condition_value(template, a, parameters_now) for a in argument)
        if name == "Fn::Or":
            return any(condition_value(template, a, parameters_now) for a in argument)
        if name == "Fn::Split":
            return str(condition_value(template, argument[1], parameters_now)).split(argument[0])
        if name == "Fn::Select":
            return condition_value(template, argument[1], parameters_now)[int(argument[0])]
        raise AssertionError(f"no evaluation for {name}")
    return node


def worker_grants(template: Template, token_parameter: str) -> list[tuple[str, str]]:
    """(action, resource) of every secret-store grant of the worker's own policies, for a
    deployment whose PixivRefreshTokenParameter is `token_parameter`."""
    values = {"PixivRefreshTokenParameter": token_parameter}
    role = getatt(template.resources_of_type(FUNCTION)["WorkerFunction"]["Role"])
    assert role is not None
    policies = template.resources_of_type("AWS::IAM::Role")[role[0]].get("Policies") or []
    grants = []
    for entry in as_list(policies):
        policy = entry
        if isinstance(entry, dict) and "Fn::If" in entry:
            condition, chosen, otherwise = entry["Fn::If"]
            holds = condition_value(template, {"Condition": condition}, values)
            policy = chosen if holds else otherwise
        for statement in policy_statements(policy):
            for action in as_list(statement.get("Action") or []):
                if str(action).startswith(("ssm:", "secretsmanager:", "kms:")):
                    resource = statement.get("Resource")
                    text = resource["Fn::Sub"] if isinstance(resource, dict) else str(resource)
                    grants.append(
                        (
                            str(action),
                            text.replace("${PixivRefreshTokenParameter}", token_parameter),
                        )
                    )
    return grants


FUNCTIONS_NOW = sorted(TEMPLATE_NOW.resources_of_type(FUNCTION))


@pytest.mark.parametrize("function", FUNCTIONS_NOW)
def test_every_function_logs_to_its_own_group_with_a_retention(function: str) -> None:
    problems = function_log_problems(TEMPLATE_NOW, function)
    assert not problems, "\n".join(problems)
    groups = [
        ref((properties.get("LoggingConfig") or {}).get("LogGroup"))
        for properties in TEMPLATE_NOW.resources_of_type(FUNCTION).values()
    ]
    assert len(set(groups)) == len(groups), f"functions share a log group: {groups}"


@pytest.mark.parametrize("function", FUNCTIONS_NOW)
def test_every_function_logs_json_with_the_platform_level_of_the_parameter(function: str) -> None:
    """JSON, so that Lambda's START/REPORT lines have a level PlatformLogLevel filters (the
    bill counts them only when the parameter's default keeps them); no application level, so
    Lambda never filters out the EMF documents (they carry no level: INFO)."""
    own = TEMPLATE_NOW.resources_of_type(FUNCTION)[function].get("LoggingConfig") or {}
    # SAM merges a function's LoggingConfig over the Globals' one, key by key.
    merged = {**(globals_function(TEMPLATE_NOW).get("LoggingConfig") or {}), **own}
    assert merged.get("LogFormat") == "JSON", merged
    assert merged.get("SystemLogLevel") == {"Ref": "PlatformLogLevel"}, merged
    assert "ApplicationLogLevel" not in merged, merged
    parameter = parameters(TEMPLATE_NOW)["PlatformLogLevel"]
    assert parameter["AllowedValues"] == ["WARN", "INFO", "DEBUG"]
    assert parameter["Default"] in parameter["AllowedValues"]


def test_the_http_api_has_access_logs_and_route_throttling() -> None:
    apis = sorted(TEMPLATE_NOW.resources_of_type(HTTP_API))
    assert apis
    for api in apis:
        problems = http_api_problems(TEMPLATE_NOW, api)
        assert not problems, "\n".join(problems)


def callback_latency_problems(template: Template) -> list[str]:
    """A lone callback is not held: the callback queue's trigger has no batching window (SQS's
    default is none; a BatchSize over 10 requires one of at least a second)."""
    problems = []
    for function, event, props in sqs_sources(template):
        if getatt(props.get("Queue")) != ("CallbackQueue", "Arn"):
            continue
        window = resolve_number(template, props.get("MaximumBatchingWindowInSeconds", 0))
        if window != 0:
            problems.append(f"{function}.{event}: a batching window of {window} s holds callbacks")
        if (resolve_number(template, props.get("BatchSize", 10)) or 0) > SQS_UNWINDOWED_BATCH:
            problems.append(f"{function}.{event}: a BatchSize over 10 needs a batching window")
    return problems


def test_a_lone_callback_is_not_held_by_a_batching_window() -> None:
    callback_triggers = [
        event
        for _, event, props in sqs_sources(TEMPLATE_NOW)
        if getatt(props.get("Queue")) == ("CallbackQueue", "Arn")
    ]
    assert callback_triggers == ["CallbackMessages"]
    assert callback_latency_problems(TEMPLATE_NOW) == []


def test_the_callback_latency_check_catches_a_window(tmp_path: Path) -> None:
    template = edited(
        tmp_path, "MaximumBatchingWindowInSeconds: 0", "MaximumBatchingWindowInSeconds: 1"
    )
    assert callback_latency_problems(template) == [
        "CallbacksFunction.CallbackMessages: a batching window of 1 s holds callbacks"
    ]


def test_every_queue_trigger_has_a_concurrency_cap() -> None:
    triggers = {function for function, _, _ in sqs_sources(TEMPLATE_NOW)}
    assert {"WorkerFunction", "CallbacksFunction"} <= triggers
    assert queue_scaling_problems(TEMPLATE_NOW) == []


def test_the_http_functions_reserve_the_parameters_concurrency() -> None:
    assert reserved_concurrency_problems(TEMPLATE_NOW) == []
    condition = conditions(TEMPLATE_NOW)["ReservesApiConcurrency"]
    assert condition_value(TEMPLATE_NOW, condition, {"ApiReservedConcurrency": "0"}) is False
    assert condition_value(TEMPLATE_NOW, condition, {"ApiReservedConcurrency": "25"}) is True


def test_schedules_get_generated_names() -> None:
    assert schedules(TEMPLATE_NOW), "no schedule to check"
    assert schedule_name_problems(TEMPLATE_NOW) == []


@pytest.mark.parametrize(
    ("token_parameter", "expected"),
    [
        ("", []),
        ("/jobstream/pixiv", [("ssm:GetParameter", "parameter/jobstream/pixiv")]),
        ("jobstream-pixiv", [("secretsmanager:GetSecretValue", "secret:jobstream-pixiv-??????")]),
    ],
    ids=["none", "ssm", "secret"],
)
def test_the_worker_may_read_exactly_the_configured_secret(
    token_parameter: str, expected: list[tuple[str, str]]
) -> None:
    """Left empty, no grant at all (it used to end in `secret:*`: every secret of the
    account); otherwise one action on the one parameter or secret named."""
    grants = worker_grants(TEMPLATE_NOW, token_parameter)
    assert [(action, resource.split(":")[-1]) for action, resource in grants] == [
        (action, suffix.split(":")[-1]) for action, suffix in expected
    ]
    for _, resource in grants:
        assert not resource.endswith("*"), resource


def test_the_worker_timeout_comes_from_one_parameter() -> None:
    """The worker's Lambda Timeout and the settings' JOBSTREAM_WORKER_TIMEOUT_S are the same
    parameter, which Lambda allows and the work queue's visibility covers six times over."""
    worker = TEMPLATE_NOW.resources_of_type(FUNCTION)["WorkerFunction"]
    parameter = ref(worker.get("Timeout"))
    assert parameter is not None, "WorkerFunction.Timeout must be !Ref a parameter"
    globals_environment = environment_of(globals_function(TEMPLATE_NOW))
    assert ref(globals_environment.get("JOBSTREAM_WORKER_TIMEOUT_S")) == parameter
    declared = parameters(TEMPLATE_NOW)[parameter]
    assert int(declared["MaxValue"]) <= LAMBDA_MAX_TIMEOUT_S
    queue = TEMPLATE_NOW.resources_of_type(QUEUE)["WorkQueue"]
    assert int(queue["VisibilityTimeout"]) >= VISIBILITY_FACTOR * int(declared["MaxValue"])
    assert int(parameters(TEMPLATE_NOW)["DefaultDeadlineMs"]["Default"]) <= (
        int(declared["Default"]) * 1000
    )


@pytest.mark.parametrize(
    ("old", "new", "check", "expected"),
    [
        (
            "        LogGroup: !Ref AckLogGroup\n",
            "",
            lambda t: function_log_problems(t, "AckFunction"),
            "AckFunction.LoggingConfig.LogGroup",
        ),
        (
            (
                "  AckLogGroup:\n    Type: AWS::Logs::LogGroup\n    Properties:\n"
                "      RetentionInDays: !Ref LogRetentionDays\n"
            ),
            "  AckLogGroup:\n    Type: AWS::Logs::LogGroup\n",
            lambda t: function_log_problems(t, "AckFunction"),
            "keeps its logs forever",
        ),
        (
            "        ThrottlingRateLimit: !Ref ApiThrottlingRateLimit\n",
            "",
            lambda t: http_api_problems(t, "HttpApi"),
            "ThrottlingRateLimit",
        ),
        (
            "      AccessLogSettings:\n",
            "      AccessLogs:\n",
            lambda t: http_api_problems(t, "HttpApi"),
            "access logs",
        ),
        (
            "              MaximumConcurrency: !Ref WorkerMaxConcurrency\n",
            "              MaximumConcurrency: 1\n",
            queue_scaling_problems,
            "WorkerFunction.WorkMessages: the queue trigger's MaximumConcurrency",
        ),
        (
            "              MaximumConcurrency: !Ref CallbacksMaxConcurrency\n",
            "",
            queue_scaling_problems,
            "CallbacksFunction.CallbackMessages: the queue trigger's MaximumConcurrency",
        ),
        (
            "      ReservedConcurrentExecutions: !If [ReservesApiConcurrency,",
            "      ReservedConcurrentExecutions: !If [SomethingElse,",
            reserved_concurrency_problems,
            "ReservedConcurrentExecutions",
        ),
        ("            OmitName: true\n", "", schedule_name_problems, "OmitName"),
    ],
    ids=[
        "no log group",
        "no retention",
        "no throttling",
        "no access logs",
        "no worker cap",
        "no callbacks cap",
        "no reservation",
        "named",
    ],
)
def test_the_limit_checks_catch(
    tmp_path: Path, old: str, new: str, check: Any, expected: str
) -> None:
    problems = check(edited(tmp_path, old, new))
    assert any(expected in problem for problem in problems), problems


def test_the_grant_check_catches_a_grant_without_its_condition(tmp_path: Path) -> None:
    """The secret grant under the 'any token' condition: an SSM name gets a secret grant too."""
    template = edited(
        tmp_path, "          - PixivTokenInSecretsManager\n", "          - HasPixivTokenParameter\n"
    )
    actions = [action for action, _ in worker_grants(template, "/jobstream/pixiv")]
    assert actions == ["ssm:GetParameter", "secretsmanager:GetSecretValue"]


def test_a_whole_callback_attempt_fits_in_the_callbacks_function() -> None:
    """The function claims a message only with the callback timeout and the outcome's margin
    left: at the largest timeout allowed, a fresh invocation must still have that time (with a
    second to spare), or it would hand every message back."""
    from jobstream.service.callback_batch import OUTCOME_MARGIN_MS

    function = TEMPLATE_NOW.resources_of_type(FUNCTION)["CallbacksFunction"]
    timeout_s = resolve_number(TEMPLATE_NOW, function_setting(TEMPLATE_NOW, function, "Timeout"))
    assert timeout_s is not None
    largest = int(parameters(TEMPLATE_NOW)["CallbackTimeoutMs"]["MaxValue"])
    assert largest + OUTCOME_MARGIN_MS + 1_000 <= timeout_s * 1000


# ------------------------------------------------------ alarms and their runbooks (issue 23)

OPERATIONS = REPOSITORY / "docs" / "operations.md"
ALARMS = sorted(TEMPLATE_NOW.resources_of_type("AWS::CloudWatch::Alarm"))


def slug(heading: str) -> str:
    """A heading's anchor, as GitHub makes it."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def runbook_problems(alarms: list[str], operations: str) -> list[str]:
    """Every alarm has a row in the alarms table of docs/operations.md whose link leads to a
    runbook heading there (the per-function error alarms: named in their runbook)."""
    anchors = {slug(line[4:]) for line in operations.splitlines() if line.startswith("### ")}
    function_errors = operations.split("### Function errors alarms", 1)[-1].split("**Meaning", 1)[0]
    rows = [line for line in operations.splitlines() if line.startswith("| `")]
    problems = []
    for alarm in alarms:
        if f"`{alarm}`" in function_errors:
            continue
        row = next((r for r in rows if f"`{alarm}`" in r.split("|")[1]), None)
        links = re.findall(r"\]\(#([^)]+)\)", row or "")
        if row is None:
            problems.append(f"{alarm}: not in the alarms table of docs/operations.md")
        elif not links or not set(links) <= anchors:
            problems.append(f"{alarm}: its row links to no runbook heading ({links})")
    return problems


def test_every_alarm_has_a_runbook() -> None:
    assert len(ALARMS) == 25
    assert runbook_problems(ALARMS, OPERATIONS.read_text(encoding="utf-8")) == []
    assert runbook_problems(["NewAlarm"], OPERATIONS.read_text(encoding="utf-8")) == [
        "NewAlarm: not in the alarms table of docs/operations.md"
    ]


@pytest.mark.parametrize("alarm", ALARMS)
def test_every_alarm_notifies_the_topic_and_says_when_it_is_ok(alarm: str) -> None:
    properties = TEMPLATE_NOW.resources_of_type("AWS::CloudWatch::Alarm")[alarm]
    expected = {"Fn::If": ["HasAlarmTopic", [{"Ref": "AlarmTopicArn"}], {"Ref": "AWS::NoValue"}]}
    assert properties["AlarmActions"] == expected
    assert properties["OKActions"] == expected


def test_the_emf_alarms_watch_this_stacks_series_of_metrics_the_code_emits() -> None:
    """An alarm on a jobstream metric names one the code emits, with this stack's `service`
    (the template sets POWERTOOLS_SERVICE_NAME to the stack's name) and only dimensions the
    metric is published with (its own, or the per-stack total)."""
    from jobstream.observability import METRICS

    variables = environment_of(globals_function(TEMPLATE_NOW))
    assert variables["POWERTOOLS_SERVICE_NAME"] == {"Ref": "AWS::StackName"}
    watched = [
        (name, alarm)
        for name, alarm in TEMPLATE_NOW.resources_of_type("AWS::CloudWatch::Alarm").items()
        if alarm.get("Namespace") == "jobstream"
    ]
    assert len(watched) == 5
    for name, alarm in watched:
        metric = METRICS[alarm["MetricName"]]
        dimensions = {d["Name"]: d["Value"] for d in alarm["Dimensions"]}
        assert dimensions.pop("service") == {"Ref": "AWS::StackName"}, name
        assert set(dimensions) <= {metric.dimension}, name


def test_the_dashboard_graphs_metrics_that_exist() -> None:
    """The dashboard's body is JSON once its ${...} are filled; every jobstream metric it graphs
    is one the code emits, for this stack; every ${...} names something of the template."""
    from jobstream.observability import METRICS

    dashboard = TEMPLATE_NOW.resources_of_type("AWS::CloudWatch::Dashboard")["Dashboard"]
    body = dashboard["DashboardBody"]["Fn::Sub"]
    assert not reference_problems(TEMPLATE_NOW, dashboard, "Dashboard")
    widgets = json.loads(SUB_VARIABLE.sub("x", body))["widgets"]
    titles = [w["properties"]["title"] for w in widgets]
    assert titles[:5] == [
        "Admissions",
        "Job outcomes",
        "Callback outcomes",
        "Queue ages (oldest message, s)",
        "Throttles",
    ]
    ours = [m for w in widgets for m in w["properties"]["metrics"] if m[0] == "jobstream"]
    assert ours
    for metric in ours:
        assert metric[1] in METRICS, metric
        assert metric[2:4] == ["service", "x"], metric
