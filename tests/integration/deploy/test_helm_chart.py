"""deploy/helm/gateway: the chart lints, renders what an operator relies on, passes the
Kubernetes schemas, and refuses values that would deploy something broken or leak a
secret.

Everything is rendered by `helm template` (no cluster), under the chart's defaults and
under ci/production-values.yaml. The rendered gateway.toml is read back by the gateway's
own `gateway.settings.parse`, so "the probes match the ports" is checked against what the
processes will listen on, not against the chart's idea of it.

Tools: helm and kubernetes-validate from .data/tools/bin (scripts/setup.sh), .venv/bin or
PATH. A missing one skips its tests, or fails them under GATEWAY_REQUIRE_CONTAINERS=1.
"""

from __future__ import annotations

import functools
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]  # PyYAML ships no stubs; types-PyYAML is not locked

import gateway
from gateway.settings import Settings, parse
from gateway.settings.secrets import NO_SECRET
from tests.support.containers import tool

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "deploy" / "helm" / "gateway"
PRODUCTION = CHART / "ci" / "production-values.yaml"
RELEASE = "pay"
#: The value sets every structural test runs under: the defaults, and production-like.
VALUE_SETS = {"default": (), "production": ("--values", str(PRODUCTION))}
#: Each Deployment (by its name after the release prefix) and the args it must run.
EXPECTED = {
    "default": {
        "serve": ["serve"],
        "settle": ["settle"],
    },
    "production": {
        "serve": ["serve"],
        "relay": ["relay"],
        "settle": ["settle"],
        "confirm": ["confirm"],
        "console": ["console"],
        "dlq-jobs": ["dlq", "run-jobs"],
        "forward-ledger-sync": ["forward", "--name", "ledger_sync", "--output", "quiet"],
        "forward-crm": ["forward", "--name", "crm", "--output", "quiet"],
    },
}
#: Custom resources kubernetes-validate has no schema for; test_monitoring_resources
#: checks them against what they must select and hold instead.
CRD_KINDS = {"ServiceMonitor", "PrometheusRule"}
#: Environment variables a container may carry as a plain value: no secret among them.
PLAIN_ENV = {"GATEWAY_CONFIG", "GATEWAY_LOG_LEVEL", "GATEWAY_NATS_URL"}
#: What the rendered file is parsed with: URLs so that it parses, no secrets read.
PARSE_ENV = {
    "GATEWAY_DATABASE_URL": "postgresql://db.invalid/gateway",
    "GATEWAY_NATS_URL": "nats://nats.invalid:4222",
}

Manifest = dict[str, Any]


# -- tools -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def helm() -> str:
    return tool("helm")


@pytest.fixture(scope="module")
def kubernetes_validate() -> str:
    return tool("kubernetes-validate")


# -- rendering ---------------------------------------------------------------------------


@functools.cache
def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    """One helm run; the same arguments are rendered once per session."""
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def template(helm: str, *args: str) -> subprocess.CompletedProcess[str]:
    return _run(helm, "template", RELEASE, str(CHART), "--namespace", "payments", *args)


def render(helm: str, *args: str) -> list[Manifest]:
    """The manifests `helm template` renders with `args`; it must succeed."""
    done = template(helm, *args)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def values_file(tmp_path: Path, values: dict[str, Any]) -> str:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values), encoding="utf-8")
    return str(path)


def of_kind(docs: list[Manifest], kind: str) -> dict[str, Manifest]:
    """The manifests of `kind`, by name without the release's `pay-gateway-` prefix."""
    prefix = f"{RELEASE}-gateway-"
    return {d["metadata"]["name"].removeprefix(prefix): d for d in docs if d["kind"] == kind}


def main_configmap(docs: list[Manifest]) -> str:
    (cm,) = [
        d
        for d in docs
        if d["kind"] == "ConfigMap" and d["metadata"]["name"] == f"{RELEASE}-gateway"
    ]
    text: str = cm["data"]["gateway.toml"]
    return text


def settings_of(docs: list[Manifest]) -> Settings:
    """The rendered gateway.toml as the gateway itself reads it."""
    return parse(tomllib.loads(main_configmap(docs)), PARSE_ENV, NO_SECRET)


def container(deployment: Manifest) -> Manifest:
    (one,) = deployment["spec"]["template"]["spec"]["containers"]
    c: Manifest = one
    return c


def walk(node: Any) -> Iterator[tuple[str, Any]]:
    """Every (key, value) pair of a parsed document, at any depth."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield key, value
            yield from walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from walk(item)


# -- the chart's own facts ---------------------------------------------------------------


def test_app_version_is_the_package_version() -> None:
    """Chart.yaml's appVersion (image.tag's default) is the gateway's version, which
    pyproject.toml takes from gateway.__version__."""
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text(encoding="utf-8"))
    assert chart["apiVersion"] == "v2"
    assert chart["appVersion"] == gateway.__version__


def test_alert_rules_are_a_copy_of_deploy_prometheus() -> None:
    """The PrometheusRule's source is the rules file CI checks with promtool, unchanged:
    edit deploy/prometheus/alerts.yml, then copy it to the chart's files/."""
    chart_copy = (CHART / "files" / "alerts.yml").read_bytes()
    assert chart_copy == (ROOT / "deploy" / "prometheus" / "alerts.yml").read_bytes()


# -- lint --------------------------------------------------------------------------------


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_helm_lint_strict_passes(helm: str, value_set: str) -> None:
    done = _run(helm, "lint", "--strict", str(CHART), *VALUE_SETS[value_set])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 chart(s) failed" in done.stdout


# -- what each process gets --------------------------------------------------------------


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_each_enabled_process_has_its_deployment(helm: str, value_set: str) -> None:
    """One Deployment per enabled process and forward target, running the image's
    `gateway` with the sub-command as args, and nothing for the disabled ones."""
    deployments = of_kind(render(helm, *VALUE_SETS[value_set]), "Deployment")
    expected = EXPECTED[value_set]
    assert set(deployments) == set(expected)
    for name, args in expected.items():
        assert container(deployments[name])["args"] == args, name


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_pods_run_restricted_with_the_config_mounted(helm: str, value_set: str) -> None:
    """The restricted security context, no API token, the ConfigMap read-only at
    /etc/gateway with GATEWAY_CONFIG naming the file, and a writable /tmp."""
    docs = render(helm, *VALUE_SETS[value_set])
    for name, deployment in of_kind(docs, "Deployment").items():
        pod = deployment["spec"]["template"]["spec"]
        c = container(deployment)
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["runAsUser"] == 10001, name
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
        assert pod["automountServiceAccountToken"] is False, name
        ctx = c["securityContext"]
        assert ctx["runAsNonRoot"] is True and ctx["runAsUser"] == 10001, name
        assert ctx["readOnlyRootFilesystem"] is True, name
        assert ctx["allowPrivilegeEscalation"] is False, name
        assert ctx["capabilities"] == {"drop": ["ALL"]}, name
        assert ctx["seccompProfile"] == {"type": "RuntimeDefault"}, name
        volumes = {v["name"]: v for v in pod["volumes"]}
        mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
        assert volumes[mounts["/etc/gateway"]["name"]]["configMap"]["name"] == f"{RELEASE}-gateway"
        assert mounts["/etc/gateway"]["readOnly"] is True, name
        assert "emptyDir" in volumes[mounts["/tmp"]["name"]], name
        env = {e["name"]: e for e in c["env"]}
        assert env["GATEWAY_CONFIG"]["value"] == "/etc/gateway/gateway.toml", name
        assert "checksum/config" in deployment["spec"]["template"]["metadata"]["annotations"]


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_probes_ask_the_ports_the_rendered_config_listens_on(helm: str, value_set: str) -> None:
    """Every process has startup, liveness and readiness probes on its own health
    endpoints, at the port the rendered gateway.toml gives its listener (read by the
    gateway's parser), bound beyond loopback so the kubelet reaches it."""
    docs = render(helm, *VALUE_SETS[value_set])
    settings = settings_of(docs)
    ready_port = settings.http.admin_port or settings.http.port
    # (port, liveness path, readiness path) per process; serve's differ (below). relay
    # and confirm serve /livez but no /readyz (their listener answers 404 there), so
    # both of their probes ask /livez.
    listeners = {
        "relay": (settings.outbox.relay_metrics_port, "/livez", "/livez"),
        "settle": (settings.settlement.metrics_port, "/livez", "/readyz"),
        "confirm": (settings.confirm.metrics_port, "/livez", "/livez"),
        "console": (settings.console.port, "/livez", "/readyz"),
        "dlq-jobs": (settings.console.jobs_metrics_port, "/livez", "/readyz"),
    }
    for name, options in settings.forward.items():
        listeners[f"forward-{name.replace('_', '-')}"] = (options.metrics_port, "/livez", "/readyz")
    # (liveness port and path, readiness port and path)
    wanted = {
        name: ((port, live), (port, ready)) for name, (port, live, ready) in listeners.items()
    }
    wanted["serve"] = ((settings.http.port, "/healthz"), (ready_port, "/readyz"))
    hosts = {
        settings.http.host,
        settings.outbox.relay_metrics_host,
        settings.settlement.metrics_host,
        settings.confirm.metrics_host,
        settings.console.host,
        settings.console.jobs_metrics_host,
        *(options.metrics_host for options in settings.forward.values()),
    }
    assert hosts == {"0.0.0.0"}
    for name, deployment in of_kind(docs, "Deployment").items():
        c = container(deployment)
        (live_port, live_path), (ready_port_, ready_path) = wanted[name]
        ports = {p["containerPort"] for p in c["ports"]}
        for probe, (port, path) in (
            ("startupProbe", (live_port, live_path)),
            ("livenessProbe", (live_port, live_path)),
            ("readinessProbe", (ready_port_, ready_path)),
        ):
            assert c[probe]["httpGet"] == {"path": path, "port": port}, (name, probe)
            assert port in ports, (name, probe)


def test_without_an_admin_port_serve_is_ready_and_scraped_on_its_public_port(helm: str) -> None:
    """processes.serve.adminPort 0: /readyz and /metrics move to the public port, and the
    probe and the metrics Service follow them."""
    docs = render(helm, "--set", "processes.serve.adminPort=0")
    assert settings_of(docs).http.admin_port == 0
    serve = container(of_kind(docs, "Deployment")["serve"])
    assert serve["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": 8080}
    assert [p["name"] for p in serve["ports"]] == ["http"]
    (port,) = of_kind(docs, "Service")["serve-metrics"]["spec"]["ports"]
    assert (port["port"], port["targetPort"]) == (8080, "http")


@pytest.mark.parametrize(("kube_version", "action"), [("1.35.0", "sleep"), ("1.29.0", "exec")])
def test_serve_drains_before_it_is_killed(helm: str, kube_version: str, action: str) -> None:
    """serve keeps answering for preStop's sleep, then drains on SIGTERM: the grace
    period covers both (the systemd unit gives the drain 30 s). Before Kubernetes 1.30,
    which has no sleep action, the image's `sleep` waits instead."""
    serve = of_kind(render(helm, "--kube-version", kube_version), "Deployment")["serve"]
    pre_stop = container(serve)["lifecycle"]["preStop"]
    assert set(pre_stop) == {action}
    if action == "sleep":
        sleep_s = pre_stop["sleep"]["seconds"]
    else:
        command = pre_stop["exec"]["command"]
        assert command[0] == "sleep"
        sleep_s = int(command[1])
    assert sleep_s > 0
    assert serve["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] >= sleep_s + 30


def test_image_is_the_app_version_unless_pinned(helm: str) -> None:
    """The tag defaults to the chart's appVersion; a digest, when given, pins it."""
    default = container(of_kind(render(helm), "Deployment")["serve"])["image"]
    assert default == f"ghcr.io/payments-webhook-gateway/gateway:{gateway.__version__}"
    pinned = container(of_kind(render(helm, *VALUE_SETS["production"]), "Deployment")["serve"])[
        "image"
    ]
    assert pinned.startswith("registry.example.com/payments/gateway@sha256:")


def test_a_config_change_rolls_the_pods(helm: str, tmp_path: Path) -> None:
    """The pod templates carry the configuration's digest, so a changed gateway.toml
    replaces the pods (a ConfigMap change alone would not)."""
    before = of_kind(render(helm), "Deployment")["serve"]
    changed = values_file(tmp_path, {"config": "[outbox]\ninline = true\nbatch_size = 500\n"})
    after = of_kind(render(helm, "--values", changed), "Deployment")["serve"]

    def digest(d: Manifest) -> str:
        value: str = d["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
        return value

    assert digest(before) != digest(after)


def test_configmap_holds_the_operators_toml(helm: str) -> None:
    """The ConfigMap is `config` as TOML, with the chart's listener keys added."""
    text = main_configmap(render(helm, *VALUE_SETS["production"]))
    data = tomllib.loads(text)
    assert data["outbox"]["inline"] is False
    assert data["providers"]["stripe"] == {
        "scheme": "stripe",
        "secret_env": "STRIPE_WEBHOOK_SECRET",
        "tolerance_s": 300,
    }
    assert data["forward"]["crm"]["max_in_flight"] == 32
    assert data["http"]["port"] == 8080 and data["http"]["admin_port"] == 9101


def test_migrate_is_a_hook_with_its_own_config(helm: str) -> None:
    """`gateway migrate` runs as a pre-install/pre-upgrade hook Job, reading a hook
    ConfigMap made before it (the release's own does not exist yet on a first install)
    that holds the same gateway.toml."""
    docs = render(helm)
    jobs = of_kind(docs, "Job")
    migrate = jobs["migrate"]
    annotations = migrate["metadata"]["annotations"]
    assert set(annotations["helm.sh/hook"].split(",")) == {"pre-install", "pre-upgrade"}
    pod = migrate["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert container(migrate)["args"] == ["migrate"]
    assert container(migrate)["securityContext"]["readOnlyRootFilesystem"] is True
    (config,) = [v["configMap"]["name"] for v in pod["volumes"] if "configMap" in v]
    hook_cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == config)
    hook_annotations = hook_cm["metadata"]["annotations"]
    assert hook_annotations["helm.sh/hook"] == annotations["helm.sh/hook"]
    assert int(hook_annotations["helm.sh/hook-weight"]) < int(annotations["helm.sh/hook-weight"])
    assert hook_cm["data"]["gateway.toml"] == main_configmap(docs)


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_budgets_cover_the_processes_with_several_pods(helm: str, value_set: str) -> None:
    """A PodDisruptionBudget for each Deployment with more than one replica, selecting
    exactly its pods; none over a single pod."""
    docs = render(helm, *VALUE_SETS[value_set])
    deployments = of_kind(docs, "Deployment")
    budgets = of_kind(docs, "PodDisruptionBudget")
    several = {n for n, d in deployments.items() if d["spec"]["replicas"] > 1}
    assert set(budgets) == several
    assert "serve" in several
    for name, budget in budgets.items():
        selector = deployments[name]["spec"]["selector"]
        assert budget["spec"]["selector"] == selector, name
        assert budget["spec"]["maxUnavailable"] == 1, name


def test_forward_target_gets_its_own_deployment(helm: str) -> None:
    """Each forward target is a Deployment of `gateway forward --name NAME` with its own
    pod labels, its own replicas, and a metrics Service that selects only its pods."""
    docs = render(helm, *VALUE_SETS["production"])
    deployments = of_kind(docs, "Deployment")
    services = of_kind(docs, "Service")
    ledger = deployments["forward-ledger-sync"]
    crm = deployments["forward-crm"]
    assert ledger["spec"]["replicas"] == 2 and crm["spec"]["replicas"] == 1
    label = "payments-gateway/forward-target"
    assert ledger["spec"]["selector"]["matchLabels"][label] == "ledger_sync"
    assert crm["spec"]["selector"]["matchLabels"][label] == "crm"
    assert (
        services["forward-crm-metrics"]["spec"]["selector"]
        == crm["spec"]["selector"]["matchLabels"]
    )
    assert container(crm)["resources"]["limits"]["memory"] == "256Mi"


def test_reconcile_runs_on_a_schedule(helm: str) -> None:
    """`gateway reconcile` is a CronJob, off by default, one run at a time."""
    assert not of_kind(render(helm), "CronJob")
    (cron,) = of_kind(render(helm, *VALUE_SETS["production"]), "CronJob").values()
    assert cron["spec"]["schedule"] == "*/5 * * * *"
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert [c["args"] for c in pod["containers"]] == [["reconcile"]]
    assert pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True


# -- secrets -----------------------------------------------------------------------------


def test_no_secret_is_rendered_in_plain_text(helm: str) -> None:
    """Secrets reach the pods only by reference: no Secret object is rendered, every
    variable but a few known plain ones comes from a secretKeyRef, the whole Secret of
    secret_env / token_env variables arrives through envFrom, and gateway.toml names
    variables rather than holding secrets."""
    docs = render(helm, *VALUE_SETS["production"])
    assert not [d for d in docs if d["kind"] == "Secret"]
    pods = [d["spec"]["template"]["spec"] for d in docs if d["kind"] in ("Deployment", "Job")]
    pods += [
        d["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        for d in of_kind(docs, "CronJob").values()
    ]
    assert len(pods) == len(EXPECTED["production"]) + 2  # the migrate Job, reconcile
    for pod in pods:
        for c in pod["containers"]:
            env = {e["name"]: e for e in c["env"]}
            for name, var in env.items():
                assert name in PLAIN_ENV or "secretKeyRef" in var.get("valueFrom", {}), name
            assert env["GATEWAY_DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {
                "name": "gateway-postgres",
                "key": "url",
            }
            assert env["GATEWAY_REDIS_URL"]["valueFrom"]["secretKeyRef"]["name"] == "gateway-redis"
            assert {"secretRef": {"name": "gateway-secrets"}} in c["envFrom"]
    config = tomllib.loads(main_configmap(docs))
    keys = {key for key, _ in walk(config)}
    assert not keys & {"secrets", "token", "api_key", "password"}
    assert {"secret_env", "token_env"} <= keys


# (values, a secret in them that must not appear in helm's output, what the error names)
LEAKS: dict[str, tuple[dict[str, Any], str, str]] = {
    "provider secret inline": (
        {"config": '[providers.stripe]\nscheme = "stripe"\nsecrets = ["whsec_LEAKED1"]\n'},
        "whsec_LEAKED1",
        "[providers.stripe] secrets",
    ),
    "service token inline": (
        {"config": '[services.billing]\ntoken = "LEAKED2"\nsubjects = ["events.billing.>"]\n'},
        "LEAKED2",
        "[services.billing] token",
    ),
    "password in config's database url": (
        {"config": '[database]\nurl = "postgresql://gw:LEAKED3@db/gateway"\n'},
        "LEAKED3",
        "database.url",
    ),
    "password in connections.database.url": (
        {"connections": {"database": {"url": "postgresql://gw:LEAKED4@db:5432/gateway"}}},
        "LEAKED4",
        "connections.database.url",
    ),
    "password as a libpq parameter": (
        {"connections": {"database": {"url": "postgresql://db/gateway?password=LEAKED5"}}},
        "LEAKED5",
        "connections.database.url",
    ),
    "NATS token": (
        {"connections": {"nats": {"url": "nats://LEAKED6@nats:4222"}}},
        "LEAKED6",
        "connections.nats.url",
    ),
}


@pytest.mark.parametrize("case", LEAKS)
def test_a_secret_in_values_is_refused_without_echoing_it(
    helm: str, tmp_path: Path, case: str
) -> None:
    """A secret written where a reference belongs stops the render, and the error names
    the setting, never the secret."""
    values, secret, named = LEAKS[case]
    done = template(helm, "--values", values_file(tmp_path, values))
    assert done.returncode != 0
    assert named in done.stderr
    assert secret not in done.stdout + done.stderr


def test_a_user_name_alone_is_not_a_secret(helm: str, tmp_path: Path) -> None:
    """A URL with only a user name (a client certificate or a password file authenticates)
    may be a plain value."""
    url = "postgresql://gateway@db:5432/gateway?sslmode=verify-full"
    docs = render(
        helm, "--values", values_file(tmp_path, {"connections": {"database": {"url": url}}})
    )
    env = {e["name"]: e for e in container(of_kind(docs, "Deployment")["serve"])["env"]}
    assert env["GATEWAY_DATABASE_URL"]["value"] == url


# -- Kubernetes schemas ------------------------------------------------------------------


#: The oldest Kubernetes the chart admits (Chart.yaml's kubeVersion), and the newest
#: kubernetes-validate knows (its default): what renders differs (the preStop action).
KUBE_VERSIONS = ("1.27.0", "1.37.0")


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_kubernetes_validate_strict_accepts_every_manifest(
    helm: str, kubernetes_validate: str, tmp_path: Path, value_set: str, kube_version: str
) -> None:
    """Every rendered manifest of a core kind passes kubernetes-validate --strict (no
    unknown field, every required one) for that Kubernetes release. ServiceMonitor and
    PrometheusRule are custom resources it has no schema for: test_monitoring_resources
    checks those."""
    docs = render(helm, *VALUE_SETS[value_set], "--kube-version", kube_version)
    core = [d for d in docs if d["kind"] not in CRD_KINDS]
    manifests = tmp_path / "rendered.yaml"
    manifests.write_text(yaml.safe_dump_all(core), encoding="utf-8")
    done = validate(kubernetes_validate, manifests, kube_version)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(core) >= 8


def validate(
    kubernetes_validate: str, manifests: Path, kube_version: str = KUBE_VERSIONS[-1]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [kubernetes_validate, "--strict", "--quiet", "-k", kube_version, str(manifests)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_kubernetes_validate_refuses_an_unknown_field(
    helm: str, kubernetes_validate: str, tmp_path: Path
) -> None:
    """The check above can fail: a Deployment with a misspelt field is refused."""
    serve = of_kind(render(helm), "Deployment")["serve"]
    serve["spec"]["template"]["spec"]["terminationGracePeriod"] = 30
    manifests = tmp_path / "broken.yaml"
    manifests.write_text(yaml.safe_dump(serve), encoding="utf-8")
    done = validate(kubernetes_validate, manifests)
    assert done.returncode != 0
    assert "terminationGracePeriod" in done.stdout + done.stderr


def test_monitoring_resources(helm: str) -> None:
    """Off by default. On, the ServiceMonitor selects every metrics Service (and only
    those) on their `metrics` port, and the PrometheusRule holds deploy/prometheus's
    rule groups as they are."""
    assert not [d for d in render(helm) if d["kind"] in CRD_KINDS]
    docs = render(helm, *VALUE_SETS["production"])
    (monitor,) = [d for d in docs if d["kind"] == "ServiceMonitor"]
    (rule,) = [d for d in docs if d["kind"] == "PrometheusRule"]
    assert monitor["apiVersion"] == rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    wanted = monitor["spec"]["selector"]["matchLabels"].items()
    selected = {
        name
        for name, service in of_kind(docs, "Service").items()
        if wanted <= service["metadata"]["labels"].items()
    }
    metrics_services = {f"{name}-metrics" for name in EXPECTED["production"] if name != "console"}
    assert selected == metrics_services
    for name in selected:
        ports = of_kind(docs, "Service")[name]["spec"]["ports"]
        assert [p["name"] for p in ports] == ["metrics"], name
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics"]
    alerts = yaml.safe_load((ROOT / "deploy" / "prometheus" / "alerts.yml").read_text("utf-8"))
    assert rule["spec"]["groups"] == alerts["groups"]


# -- refusals ----------------------------------------------------------------------------

# (helm arguments, what the schema error names)
SCHEMA_BREAKS: dict[str, tuple[list[str], str]] = {
    "negative replicas": (["--set", "processes.serve.replicas=-1"], "/processes/serve/replicas"),
    "unknown process": (["--set", "processes.serf.enabled=true"], "serf"),
    "unknown key in a process": (["--set", "processes.settle.replica=2"], "replica"),
    "unknown top-level key": (["--set", "replicaCount=3"], "replicaCount"),
    "metrics listener off": (["--set", "processes.settle.metricsPort=0"], "metricsPort"),
    "pull policy": (["--set", "image.pullPolicy=Sometimes"], "pullPolicy"),
    "forward target name": (["--set", "processes.forward.targets[0].name=Billing"], "name"),
    "log level": (["--set", "logLevel=verbose"], "logLevel"),
}


@pytest.mark.parametrize("case", SCHEMA_BREAKS)
def test_values_schema_refuses(helm: str, case: str) -> None:
    args, named = SCHEMA_BREAKS[case]
    done = template(helm, *args)
    assert done.returncode != 0
    assert "schema" in done.stderr and named in done.stderr, done.stderr


def test_helm_lint_fails_on_values_the_schema_refuses(helm: str) -> None:
    done = _run(helm, "lint", "--strict", str(CHART), "--set", "processes.serve.replicas=-1")
    assert done.returncode != 0


FORWARD_BILLING = '[forward.billing]\nurl = "https://billing.example.com/"\nsecret_env = "B"\n'
# (values, what the error names)
CONFIG_BREAKS: dict[str, tuple[dict[str, Any], str]] = {
    "TOML that does not parse": ({"config": "[outbox\ninline = true\n"}, "not valid TOML"),
    "a chart-owned port set otherwise": (
        {"config": "[settlement]\nmetrics_port = 9999\n"},
        "processes.settle.metricsPort",
    ),
    "loopback listener": ({"config": '[http]\nhost = "127.0.0.1"\n'}, "listenHost"),
    "a forward target the config does not declare": (
        {"processes": {"forward": {"targets": [{"name": "crm"}]}}, "config": FORWARD_BILLING},
        "[forward.crm]",
    ),
    "two targets with one resource name": (
        {
            "config": FORWARD_BILLING.replace("billing]", "bill-ing]")
            + FORWARD_BILLING.replace("billing]", "bill_ing]"),
            "processes": {"forward": {"targets": [{"name": "bill-ing"}, {"name": "bill_ing"}]}},
        },
        "forward-bill-ing",
    ),
    "an outbox nobody publishes": ({"config": "[outbox]\ninline = false\n"}, "processes.relay"),
    "admin port on the public port": (
        {"processes": {"serve": {"adminPort": 8080}}},
        "adminPort",
    ),
    "a URL both plain and from a Secret": (
        {
            "connections": {
                "nats": {"url": "nats://n:4222", "secretKeyRef": {"name": "s", "key": "k"}}
            }
        },
        "connections.nats",
    ),
}


@pytest.mark.parametrize("case", CONFIG_BREAKS)
def test_template_refuses_a_configuration_that_would_break(
    helm: str, tmp_path: Path, case: str
) -> None:
    """What the schema cannot see (the TOML, and how values and TOML agree) is refused
    while rendering, with a message naming the value to change."""
    values, named = CONFIG_BREAKS[case]
    done = template(helm, "--values", values_file(tmp_path, values))
    assert done.returncode != 0
    assert named in done.stderr, done.stderr


def test_the_longest_forward_target_name_still_makes_valid_resources(
    helm: str, kubernetes_validate: str, tmp_path: Path
) -> None:
    """A target name at the schema's 63 characters, under a long release name: every
    resource name and label value stays within Kubernetes' 63, and the manifests pass."""
    name = "t" * 63
    config = (
        f'[forward.{name}]\nurl = "https://billing.example.com/hooks"\n'
        'secret_env = "BILLING_SECRET"\n'
    )
    values = {"config": config, "processes": {"forward": {"targets": [{"name": name}]}}}
    done = _run(
        helm,
        "template",
        "a-release-name-of-forty-characters-long",
        str(CHART),
        "--values",
        values_file(tmp_path, values),
    )
    assert done.returncode == 0, done.stderr
    docs = [doc for doc in yaml.safe_load_all(done.stdout) if doc]
    deployments = [d for d in docs if d["kind"] == "Deployment"]
    forward = [d for d in deployments if container(d)["args"][:1] == ["forward"]]
    assert [container(d)["args"][:3] for d in forward] == [["forward", "--name", name]]
    for doc in docs:
        assert len(doc["metadata"]["name"]) <= 63, doc["metadata"]["name"]
        for value in doc["metadata"].get("labels", {}).values():
            assert len(str(value)) <= 63, value
    manifests = tmp_path / "long.yaml"
    manifests.write_text(yaml.safe_dump_all(docs), encoding="utf-8")
    checked = validate(kubernetes_validate, manifests)
    assert checked.returncode == 0, checked.stdout + checked.stderr
