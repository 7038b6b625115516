"""deploy/k8s/redis (replicas sharing state in Redis) and deploy/haproxy, checked offline.

The overlay's patches are applied here the way kustomize's strategic merge does
for these fields (containers by name, args replaced, env merged by name, the
ConfigMap's key replaced), and the results validated against the Kubernetes
schemas (kubernetes-validate, strict). The haproxy config is checked with
``haproxy -c`` when haproxy is installed; tests/test_replicas.py runs it for real.
"""

from __future__ import annotations

import copy
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mcp_hub.cli.main import build_parser
from mcp_hub.config.model import parse_config
from tests.system_services import HAPROXY_CFG, require_binary

yaml = pytest.importorskip("yaml", reason="PyYAML is in the dev extra")

ROOT = Path(__file__).resolve().parents[1]
K8S = ROOT / "deploy" / "k8s"
OVERLAY = K8S / "redis"
K8S_VERSION = "1.30"


def _load(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(path.read_text())
    return doc


def _merged_deployment() -> dict[str, Any]:
    base = copy.deepcopy(_load(K8S / "deployment.yaml"))
    patch = _load(OVERLAY / "deployment-patch.yaml")
    (container,) = base["spec"]["template"]["spec"]["containers"]
    (change,) = patch["spec"]["template"]["spec"]["containers"]
    assert change["name"] == container["name"]
    container["args"] = change["args"]
    names = {e["name"] for e in change["env"]}
    container["env"] = [e for e in container["env"] if e["name"] not in names] + change["env"]
    return base


def test_overlay_lists_its_files_and_the_base() -> None:
    kust = _load(OVERLAY / "kustomization.yaml")
    assert "../" in kust["resources"]
    listed = set(kust["resources"]) - {"../"} | {p["path"] for p in kust["patches"]}
    assert listed == {p.name for p in OVERLAY.glob("*.yaml")} - {"kustomization.yaml"}


@pytest.mark.parametrize("name", ["redis-statefulset.yaml", "redis-service.yaml",
                                  "configmap-patch.yaml", "merged-deployment"])
def test_overlay_objects_match_the_kubernetes_schema(name: str) -> None:
    kv = pytest.importorskip("kubernetes_validate", reason="needs kubernetes-validate")
    doc = _merged_deployment() if name == "merged-deployment" else _load(OVERLAY / name)
    try:
        kv.validate(doc, K8S_VERSION, strict=True)
    except kv.ValidationError as exc:
        pytest.fail(f"{name}: {'.'.join(str(p) for p in exc.path)}: {exc.message}")


def test_overlay_serves_stateful_sessions_sealed_with_the_secret() -> None:
    dep = _merged_deployment()
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    args = build_parser().parse_args(c["args"])
    assert (args.transport, args.host, args.stateless) == ("http", "0.0.0.0", False)
    env = {e["name"]: e for e in c["env"]}
    ref = env["MCP_HUB_SESSION_SECRET"]["valueFrom"]["secretKeyRef"]
    secret = _load(K8S / "secret.example.yaml")
    assert ref["name"] == secret["metadata"]["name"] and ref["key"] in secret["stringData"]
    text = _load(OVERLAY / "configmap-patch.yaml")["data"]["servers.toml"]
    config = parse_config(text, environ={"MCP_HUB_TOKEN": "x" * 32,
                                         "MCP_HUB_SESSION_SECRET": "s" * 32})
    assert config.hub.http.stateless is False
    assert config.hub.http.session_secret == "s" * 32
    assert config.state.url is not None
    host = re.match(r"redis://([^:/]+)", config.state.url)
    assert host is not None
    service = _load(OVERLAY / "redis-service.yaml")
    assert host.group(1) == service["metadata"]["name"]
    sts = _load(OVERLAY / "redis-statefulset.yaml")
    labels = sts["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert sts["spec"]["serviceName"] == service["metadata"]["name"]
    # The hub's own Service must not select the Redis pods.
    hub_service = _load(K8S / "service.yaml")
    hub_labels = dep["spec"]["template"]["metadata"]["labels"]
    assert hub_service["spec"]["selector"].items() <= hub_labels.items()
    assert "app.kubernetes.io/component" in service["spec"]["selector"]


def test_haproxy_example_is_round_robin_without_stickiness() -> None:
    text = HAPROXY_CFG.read_text()
    lines = [ln.split("#")[0].strip() for ln in text.splitlines()]
    assert "balance roundrobin" in lines
    for sticky in ("cookie", "stick", "hash-type", "prefer-last-server", "balance source"):
        assert not any(ln.startswith(sticky) for ln in lines), sticky
    assert sum(ln.startswith("server ") for ln in lines) == 3


def test_haproxy_example_is_valid() -> None:
    binary = require_binary("haproxy")
    env = {"MCP_HUB_LB_BIND": "127.0.0.1:8080", "MCP_HUB_1": "127.0.0.1:1",
           "MCP_HUB_2": "127.0.0.1:2", "MCP_HUB_3": "127.0.0.1:3"}
    run = subprocess.run([binary, "-c", "-f", str(HAPROXY_CFG)], env=env,
                         capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stdout + run.stderr
