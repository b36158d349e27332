"""The Kubernetes manifests (deploy/kubernetes/) checked offline: every resource against the
Kubernetes API schemas (kubernetes-validate, strict: no unknown field), and what the manifests
promise: probes on the servers' health endpoints, resources, read-only data, the balancer
finding the replicas. Validated, not run: no cluster runs here."""

from __future__ import annotations

import kubernetes_validate
import pytest
import yaml
from docker_host import REPOSITORY

MANIFESTS = REPOSITORY / "deploy" / "kubernetes"
KINDS = ("openenv", "mcp")


def resources() -> list[tuple[str, dict]]:
    return [
        (path.name, resource)
        for path in sorted(MANIFESTS.glob("*.yaml"))
        for resource in yaml.safe_load_all(path.read_text())
    ]


def named(kind: str, name: str) -> dict:
    (found,) = [r for _, r in resources() if r["kind"] == kind and r["metadata"]["name"] == name]
    return found


def test_every_resource_passes_the_kubernetes_schema_strictly(say):
    version = kubernetes_validate.latest_version()
    checked = []
    for file, resource in resources():
        kubernetes_validate.validate(resource, version, strict=True)
        checked.append(f"{file}: {resource['kind']}/{resource['metadata']['name']}")
    assert len(checked) == 9, checked
    say(f"\nKubernetes {version} schemas, strict: {len(checked)} resources valid")
    for line in checked:
        say(f"    {line}")


def test_a_manifest_with_a_misspelt_field_is_refused():
    deployment = named("Deployment", "openenv")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["readinesProbe"] = container.pop("readinessProbe")
    with pytest.raises(kubernetes_validate.ValidationError, match="readinesProbe"):
        kubernetes_validate.validate(deployment, kubernetes_validate.latest_version(), True)


@pytest.mark.parametrize("kind", KINDS)
def test_replicas_probe_health_and_mount_the_data_read_only(kind):
    pod = named("Deployment", kind)["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        assert container[probe]["httpGet"]["path"] == "/health"
    assert {"cpu", "memory"} <= set(container["resources"]["limits"])
    assert {"cpu", "memory"} <= set(container["resources"]["requests"])
    (mount,) = container["volumeMounts"]
    assert mount["readOnly"] is True
    (volume,) = pod["volumes"]
    assert volume["persistentVolumeClaim"] == {"claimName": "spider-data", "readOnly": True}
    # The headless Service the balancer resolves selects exactly these pods.
    service = named("Service", f"{kind}-replicas")
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"].items() <= pod_labels(kind).items()


def pod_labels(name: str) -> dict:
    return named("Deployment", name)["spec"]["template"]["metadata"]["labels"]


def test_the_balancer_resolves_the_replicas_services_and_alone_reaches_them():
    (balancer,) = named("Deployment", "balancer")["spec"]["template"]["spec"]["containers"]
    environment = {variable["name"]: variable["value"] for variable in balancer["env"]}
    for kind in KINDS:
        service = named("Service", f"{kind}-replicas")["metadata"]
        address = f"{service['name']}.{service['namespace']}.svc.cluster.local"
        assert environment[f"{kind.upper()}_REPLICAS"] == address
    policy = named("NetworkPolicy", "replicas-from-the-balancer-only")["spec"]
    for kind in KINDS:
        assert policy["podSelector"]["matchLabels"].items() <= pod_labels(kind).items()
    (source,) = policy["ingress"][0]["from"]
    assert source["podSelector"]["matchLabels"].items() <= pod_labels("balancer").items()


def test_every_resource_is_in_the_sqlenv_namespace():
    for file, resource in resources():
        if resource["kind"] != "Namespace":
            assert resource["metadata"]["namespace"] == "sqlenv", file
