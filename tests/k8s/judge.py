"""The Kubernetes judges of a manifest, without an API server: the operators' CRDs and rules.

No API server runs on these machines, so what it would do on `kubectl apply
--validate=strict` is done here, in its order:

1. **Pruning and defaulting** (`apply_defaults`): a null in a field that is not
   nullable is dropped, then every `default` of the CRD's structural schema is filled
   in where the object has the parent and not the field, inside defaults too.
2. **Schema** (`crd_schema`): the CRD's `openAPIV3Schema` as JSON Schema with unknown
   fields refused (strict field validation): `additionalProperties: false` on every
   object unless `x-kubernetes-preserve-unknown-fields`; an object with neither
   properties nor additionalProperties holds nothing (the server prunes all of it);
   `x-kubernetes-int-or-string` is integer or string, `nullable` admits null,
   `x-kubernetes-embedded-resource` admits `apiVersion`, `kind` and an ObjectMeta;
   `format: int32` bounds the integer; the root `metadata` is Kubernetes' ObjectMeta.
   `x-kubernetes-list-type: map` and `set` lists are checked for duplicate keys.
3. **CEL** (`cel_errors`): every `x-kubernetes-validations` rule on the value it sits
   on, with cel-expr-python (Google's C++ CEL: strings and optional extensions); rules
   naming `oldSelf` are transition rules and do not run on create.
4. **Webhooks and controllers** (`distrecipe.engines.k8s.breaches`, lint's DR38x).
5. **Pods**: every pod template the operator will create, checked by
   `kubernetes-validate` in strict mode against Kubernetes' own schemas. A TrainJob
   has none of its own: its node pod is the `torch-distributed` runtime's template
   with the trainer's image, command, resources and the injected `PET_*` variables,
   as Trainer's JobSet builder makes it, and the TrainJob's `runtimePatches` for that
   replicated job merged in as a strategic merge does (lists keyed by name).

The CRDs are the release tags' bytes (`crds/PROVENANCE.csv`).
"""

from __future__ import annotations

import copy
import csv
import functools
import hashlib
import json
from pathlib import Path
from typing import Any

import yaml

from distrecipe.engines.k8s import RESERVED_ENV, TRAINER_CONTAINER, kind_of

CRDS = Path(__file__).parent / "crds"
CRD_FILES = {
    "trainjob": "trainer-v2.3.0_trainer.kubeflow.org_trainjobs.yaml",
    "rayjob": "kuberay-v1.7.0_ray.io_rayjobs.yaml",
    "pytorchjob": "training-operator-v1.9.0_kubeflow.org_pytorchjobs.yaml",
    "pytorchjob-v1.9.4": "trainer-v1.9.4_kubeflow.org_pytorchjobs.yaml",
    "clustertrainingruntime": "trainer-v2.3.0_trainer.kubeflow.org_clustertrainingruntimes.yaml",
}
TORCH_RUNTIME = "trainer-v2.3.0_runtime_torch_distributed.yaml"
KUBERNETES = "1.33"
"""The Kubernetes version whose core schemas judge the pods (kubernetes-validate bundles 1.25-1.37)."""
INT32 = (-(2**31), 2**31 - 1)


def provenance() -> list[dict[str, str]]:
    """PROVENANCE.csv's rows, each file's sha256 checked against its bytes."""
    rows = list(csv.DictReader((CRDS / "PROVENANCE.csv").open(encoding="utf-8")))
    for row in rows:
        digest = hashlib.sha256((CRDS / row["file"]).read_bytes()).hexdigest()
        assert digest == row["sha256"], f"{row['file']} is not the bytes of {row['repo']}@{row['tag']}"
    return rows


@functools.cache
def load(file: str) -> Any:
    return yaml.load((CRDS / file).read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def openapi(name: str) -> dict[str, Any]:
    """The storage version's `openAPIV3Schema` of one CRD."""
    crd = load(CRD_FILES[name])
    version = next(v for v in crd["spec"]["versions"] if v.get("storage", True))
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


# ----------------------------------------------------------------------------- 1. defaults
def apply_defaults(schema: dict[str, Any], value: Any) -> Any:
    """`value` pruned of non-nullable nulls and defaulted as the API server does (a copy)."""
    value = copy.deepcopy(value)
    _default(schema, value)
    return value


def _default(schema: dict[str, Any], value: Any) -> None:
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for key in [k for k, v in value.items() if v is None and not properties.get(k, {}).get("nullable")]:
            if key in properties:
                del value[key]
        for key, sub in properties.items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
            if key in value:
                _default(sub, value[key])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key in value:
                if key not in properties:
                    _default(extra, value[key])
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            _default(schema["items"], item)


# ----------------------------------------------------------------------------- 2. schema
def strict(node: Any, *, root: bool = False) -> Any:
    """A structural schema as JSON Schema (draft 2020-12) that refuses unknown fields."""
    if isinstance(node, list):
        return [strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: strict(value) for key, value in node.items()
           if key not in ("x-kubernetes-validations", "default")}
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["type"] = ["integer", "string"]
    if node.get("nullable"):
        types = out.get("type")
        out["type"] = [*(types if isinstance(types, list) else [types] if types else []), "null"]
    if node.get("type") == "integer" and node.get("format") == "int32":
        out.setdefault("minimum", INT32[0])
        out.setdefault("maximum", INT32[1])
    if node.get("type") == "object" and not node.get("x-kubernetes-preserve-unknown-fields"):
        properties = dict(out.get("properties", {}))
        if node.get("x-kubernetes-embedded-resource"):
            properties.setdefault("apiVersion", {"type": "string"})
            properties.setdefault("kind", {"type": "string"})
            properties["metadata"] = OBJECT_META
        if root:
            properties["metadata"] = OBJECT_META
        if properties or "additionalProperties" not in out:
            out["properties"] = properties
        if "additionalProperties" not in out:
            out["additionalProperties"] = False
    return out


OBJECT_META = {"$ref": "/api/_definitions.json#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}


@functools.cache
def _core_registry() -> Any:
    """Kubernetes' own definitions (strict), as kubernetes-validate bundles them."""
    from kubernetes_validate.utils import schema_contents
    from referencing import Registry, Resource

    definitions = schema_contents(f"kubernetes-json-schema/v{KUBERNETES}.0-local-strict/_definitions.json",
                                  KUBERNETES)
    return Resource.from_contents(definitions) @ Registry()


@functools.cache
def validator(name: str) -> Any:
    import jsonschema

    schema = {"$id": f"https://kubernetes.io/api/crd/{name}", **strict(openapi(name), root=True)}
    return jsonschema.Draft202012Validator(schema, registry=_core_registry())


def schema_errors(name: str, obj: Any) -> list[str]:
    found = sorted(validator(name).iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))
    return [f"{_path(e.absolute_path)}: {e.message}" for e in found]


def list_errors(schema: dict[str, Any], value: Any, path: str = "") -> list[str]:
    """Duplicate keys in `x-kubernetes-list-type: map` lists, duplicate items in `set` lists."""
    errors: list[str] = []
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        kind = schema.get("x-kubernetes-list-type")
        if kind == "map":
            keys = [tuple(json.dumps(item.get(k), sort_keys=True) for k in schema["x-kubernetes-list-map-keys"])
                    for item in value if isinstance(item, dict)]
            errors += [f"{path}: duplicate entry {key}" for key in sorted({k for k in keys if keys.count(k) > 1})]
        elif kind == "set":
            items = [json.dumps(item, sort_keys=True) for item in value]
            errors += [f"{path}: duplicate item {item}" for item in sorted({i for i in items if items.count(i) > 1})]
        for index, item in enumerate(value):
            errors += list_errors(schema["items"], item, f"{path}[{index}]")
    elif isinstance(value, dict):
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                errors += list_errors(sub, value[key], f"{path}.{key}" if path else key)
    return errors


# ----------------------------------------------------------------------------- 3. CEL
@functools.cache
def _cel_env() -> Any:
    from cel_expr_python import cel
    from cel_expr_python.ext import ext_math, ext_optional, ext_strings

    return cel.NewEnv(variables={"self": cel.Type.DYN, "oldSelf": cel.Type.DYN},
                      extensions=[ext_strings.ExtStrings(), ext_optional.ExtOptional(), ext_math.ExtMath()])


@functools.cache
def _compiled(rule: str) -> Any:
    return _cel_env().compile(rule)


def cel_rules(schema: dict[str, Any]) -> list[str]:
    """Every rule of a CRD schema (for the test that each compiles)."""
    found = [rule["rule"] for rule in schema.get("x-kubernetes-validations", [])]
    for sub in [*schema.get("properties", {}).values(),
                *(s for s in (schema.get("items"), schema.get("additionalProperties")) if isinstance(s, dict))]:
        found += cel_rules(sub)
    return found


def cel_errors(schema: dict[str, Any], value: Any, path: str = "") -> list[str]:
    """Every create-time rule a (defaulted) value breaks, with the CRD's message."""
    errors: list[str] = []
    for rule in schema.get("x-kubernetes-validations", []):
        if "oldSelf" in rule["rule"]:
            continue  # a transition rule: only on update
        result = _compiled(rule["rule"]).eval(data={"self": value}).plain_value()
        if result is not True:
            message = rule.get("message") or f"failed rule: {rule['rule']}"
            if "messageExpression" in rule:
                message = str(_compiled(rule["messageExpression"]).eval(data={"self": value}).plain_value())
            errors.append(f"{path or '<root>'}: {message}")
    if isinstance(value, dict):
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                errors += cel_errors(sub, value[key], f"{path}.{key}" if path else key)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key, item in value.items():
                errors += cel_errors(extra, item, f"{path}[{key}]")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            errors += cel_errors(schema["items"], item, f"{path}[{index}]")
    return errors


# ----------------------------------------------------------------------------- 5. pods
def torch_runtime() -> dict[str, Any]:
    runtime: dict[str, Any] = load(TORCH_RUNTIME)
    return runtime


def trainjob_node_pod(job: dict[str, Any]) -> dict[str, Any]:
    """The node pod template Trainer builds from the torch-distributed runtime for `job`
    (`plugins/jobset/builder.go:129-136`: the trainer's image, command, args and resources
    replace the `node` container's; `plugins/torch/torch.go:145-176`: the PET_* variables)."""
    replicated = torch_runtime()["spec"]["template"]["spec"]["replicatedJobs"]
    node_job = next(r for r in replicated
                    if r["template"]["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] == "trainer")
    pod = copy.deepcopy(node_job["template"]["spec"]["template"])
    trainer = job["spec"]["trainer"]
    container = next(c for c in pod["spec"]["containers"] if c["name"] == TRAINER_CONTAINER)
    for key, field in (("image", "image"), ("command", "command"), ("args", "args"),
                       ("resourcesPerNode", "resources")):
        if key in trainer:
            container[field] = copy.deepcopy(trainer[key])
    name = job["metadata"]["name"]
    injected = {"PET_NNODES": str(trainer.get("numNodes", 1)),
                "PET_NPROC_PER_NODE": str(trainer.get("numProcPerNode", "auto")),
                "PET_MASTER_ADDR": f"{name}-node-0-0.{name}", "PET_MASTER_PORT": "29500"}
    env = [*copy.deepcopy(trainer.get("env", [])), *({"name": k, "value": v} for k, v in injected.items()),
           {"name": "PET_NODE_RANK", "valueFrom": {"fieldRef": {
               "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}]
    assert {e["name"] for e in env} >= set(RESERVED_ENV)
    container["env"] = env
    container.setdefault("ports", []).append({"containerPort": 29500})
    for patch in job["spec"].get("runtimePatches", []):
        for target in get_path(patch, "trainingRuntimeSpec", "template", "spec", "replicatedJobs") or []:
            if target.get("name") == node_job["name"]:
                _patch_pod(pod["spec"], get_path(target, "template", "spec", "template", "spec") or {})
    return pod


def get_path(data: Any, *keys: str) -> Any:
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def _patch_pod(spec: dict[str, Any], patch: dict[str, Any]) -> None:
    """A runtime patch's pod spec onto the runtime's, as a strategic merge does: the lists
    the CRD keys by name (`volumes`, `containers` and their `env`, `volumeMounts`) merged
    item by item, anything else replaced."""
    for key, value in patch.items():
        if key in ("volumes", "containers", "initContainers"):
            _merge_named(spec.setdefault(key, []), value, nested=key != "volumes")
        else:
            spec[key] = copy.deepcopy(value)


def _merge_named(items: list[dict[str, Any]], patches: list[dict[str, Any]], *, nested: bool) -> None:
    for patch in patches:
        found = next((item for item in items if item.get("name") == patch["name"]), None)
        if found is None:
            items.append(copy.deepcopy(patch))
            continue
        for key, value in patch.items():
            if nested and key in ("env", "volumeMounts"):
                _merge_named(found.setdefault(key, []), value, nested=False)
            else:
                found[key] = copy.deepcopy(value)


def pod_templates(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every pod template the operator creates pods from, by where it is."""
    kind = kind_of(job)
    spec = job["spec"]
    if kind == "trainjob":
        return {"trainer node pod": trainjob_node_pod(job)}
    if kind == "rayjob":
        cluster = spec["rayClusterSpec"]
        found = {"headGroupSpec.template": cluster["headGroupSpec"]["template"]}
        for index, group in enumerate(cluster.get("workerGroupSpecs", [])):
            found[f"workerGroupSpecs[{index}].template"] = group["template"]
        return found
    return {f"pytorchReplicaSpecs.{role}.template": replica["template"]
            for role, replica in spec["pytorchReplicaSpecs"].items()}


def pod_errors(template: dict[str, Any]) -> list[str]:
    """Kubernetes' strict core schema on one pod template (as a v1 PodTemplate object)."""
    import kubernetes_validate

    wrapped = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}, "template": template}
    try:
        kubernetes_validate.validate(wrapped, KUBERNETES, strict=True)
    except kubernetes_validate.ValidationError as exc:
        return [f"{_path(exc.path)}: {exc.message}"]
    return []


# ----------------------------------------------------------------------------- all of it
def judge(job: dict[str, Any], crd: str | None = None) -> list[str]:
    """Everything an API server and the operator would refuse in `job`; empty when accepted."""
    from distrecipe.engines.k8s import breaches

    kind = kind_of(job)
    assert kind is not None, f"not a TrainJob, RayJob or PyTorchJob: {job.get('kind')}"
    name = crd or kind
    schema = openapi(name)
    defaulted = apply_defaults(schema, job)
    errors = schema_errors(name, defaulted)
    errors += list_errors(schema, defaulted)
    if not errors:  # CEL runs on what the schema admitted
        errors += cel_errors(schema, defaulted)
    errors += [f"{b.code} {_path(b.path)}: {b.message}" for b in breaches(kind, defaulted)]
    for where, template in pod_templates(defaulted).items():
        errors += [f"{where}: {e}" for e in pod_errors(template)]
    return errors


def _path(path: Any) -> str:
    return ".".join(map(str, path)) or "<root>"
