"""The Grafana dashboard in deploy/grafana: every query it makes is PromQL that parses,
every metric it reads is one the gateway exports, and the thresholds it draws are the
alert rules' own."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.metrics import Metrics

ROOT = Path(__file__).resolve().parents[2]
GRAFANA = ROOT / "deploy" / "grafana"
DASHBOARD = GRAFANA / "gateway-dashboard.json"
RULES = ROOT / "deploy" / "prometheus" / "alerts.yml"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"

#: Grafana's own variables, as a query sent to Prometheus would have them.
GRAFANA_VARIABLES = {
    "$__rate_interval": "5m",
    "$__interval": "1m",
    "$__range": "1h",
    "$provider": ".*",
}
# Words of PromQL that look like metric names: operators, modifiers and clause keywords.
KEYWORDS = frozenset(
    {
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "offset",
        "bool",
        "and",
        "or",
        "unless",
        "atan2",
        "inf",
        "nan",
    }
)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGES = re.compile(r"\[[^\[\]]*\]")
_CLAUSES = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_NAME = re.compile(r"(?<![\w:.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?")


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def panels(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in items:
        yield panel
        yield from panels(panel.get("panels", []))


def exprs() -> list[str]:
    """Every PromQL expression of the panels (a row's nested panels too)."""
    found = [t["expr"] for p in panels(dashboard()["panels"]) for t in p.get("targets", [])]
    assert found, "the dashboard has no query"
    return found


def as_sent(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr, f"a Grafana variable this test does not know: {expr}"
    return expr


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects: identifiers that are not functions,
    keywords, label names (in matchers and in by/on clauses) or durations."""
    text = _STRING.sub('""', as_sent(expr))
    text = _MATCHERS.sub(" ", text)
    text = _RANGES.sub(" ", text)
    text = _CLAUSES.sub(" ", text)
    return {name for name, call in _NAME.findall(text) if not call and name not in KEYWORDS}


def exported() -> set[str]:
    """The sample names the gateway's registry exposes: counters as `_total`,
    histograms with their `_bucket`, `_sum` and `_count` series."""
    names: set[str] = set()
    for line in Metrics().render().splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            names.add(name)
            if kind == "histogram":
                names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
            if kind == "counter" and not name.endswith("_total"):
                names.add(f"{name}_total")
    return names


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (
            'sum by (provider) (rate(gateway_webhooks_total{provider=~"$provider"}[5m]))',
            {"gateway_webhooks_total"},
        ),
        (
            "histogram_quantile(0.99, sum by (le) (rate(gateway_request_seconds_bucket[5m])))",
            {"gateway_request_seconds_bucket"},
        ),
        ("max(a_metric) / on (job) group_left (x) b_metric offset 5m", {"a_metric", "b_metric"}),
        ('sum(x{l="gateway_not_a_metric"}) or vector(0)', {"x"}),
    ],
)
def test_metric_names_are_read_from_promql(expr: str, expected: set[str]) -> None:
    """The extraction this test relies on: functions, labels and strings are not metrics."""
    assert metric_names(expr) == expected


def test_every_metric_the_dashboard_queries_is_exported() -> None:
    known = exported()
    queried = {name for expr in exprs() for name in metric_names(expr)}
    assert queried, "no metric name found in the dashboard's queries"
    assert queried - known == set()
    # The variable's own query (Grafana's label_values, not PromQL) names one too.
    variables = dashboard()["templating"]["list"]
    for variable in variables:
        if variable["type"] == "query":
            metric = re.fullmatch(r"label_values\((\w+),\s*\w+\)", variable["definition"])
            assert metric is not None and metric.group(1) in known


def test_the_areas_the_operators_asked_for_are_there() -> None:
    queried = {name for expr in exprs() for name in metric_names(expr)}
    for name in (
        "gateway_webhooks_total",  # intake by provider and outcome
        "gateway_outbox_lag_seconds",  # outbox lag
        "gateway_dlq_unresolved",  # DLQ depth
        "gateway_dlq_total",  # DLQ growth
        "gateway_retries_total",  # retries by subject
        "gateway_settlements_total",  # settlement rate
        "gateway_order_held_keys",  # held keys
    ):
        assert name in queried, name


@pytest.mark.skipif(not Path(PROMTOOL).exists(), reason="promtool not installed")
def test_every_query_parses_as_promql(tmp_path: Path) -> None:
    """promtool parses each expression (as a recording rule), as Prometheus will."""
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"dashboard:query{i}", "expr": as_sent(expr)}
                    for i, expr in enumerate(exprs())
                ],
            }
        ]
    }
    path = tmp_path / "dashboard_rules.yml"
    path.write_text(json.dumps(rules), encoding="utf-8")  # JSON is YAML
    result = subprocess.run(
        [PROMTOOL, "check", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_it_is_ready_for_file_provisioning() -> None:
    """A provisioned dashboard has a stable uid, no import-time inputs, and reaches
    Prometheus through its `datasource` variable whatever the data source is named."""
    board = dashboard()
    assert board["uid"] and "__inputs" not in board and board.get("id") is None
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in panels(board["panels"])]
    assert len(ids) == len(set(ids))
    for panel in panels(board["panels"]):
        if panel["type"] == "row":
            continue
        refs = [panel["datasource"], *(t["datasource"] for t in panel["targets"])]
        assert all(ref == {"type": "prometheus", "uid": "${datasource}"} for ref in refs)
    provisioning = (GRAFANA / "provisioning" / "dashboards.yaml").read_text(encoding="utf-8")
    assert "apiVersion: 1" in provisioning and "type: file" in provisioning


def alert_thresholds() -> dict[str, float]:
    """Each alert rule's threshold: the number its expression is compared with last."""
    found: dict[str, float] = {}
    text = RULES.read_text(encoding="utf-8")
    for name, body in re.findall(r"- alert: (\w+)\n(.*?)(?=\n\s*- alert:|\Z)", text, re.S):
        expr = body.split("labels:")[0]
        numbers = re.findall(r">\s*([0-9.]+)", expr)
        if numbers:
            found[name] = float(numbers[-1])
    return found


def test_thresholds_drawn_are_the_alert_rules() -> None:
    """A panel that names an alert draws that alert's threshold, so the line on the
    dashboard is where the page fires."""
    rules = alert_thresholds()
    checked = 0
    for panel in panels(dashboard()["panels"]):
        named = re.findall(r"\b(Gateway\w+)", panel.get("description", ""))
        steps = panel.get("fieldConfig", {}).get("defaults", {}).get("thresholds", {})
        values = [s["value"] for s in steps.get("steps", []) if s["value"] is not None]
        if not named or not values:
            continue
        assert values == [rules[named[0]]], panel["title"]
        checked += 1
    assert checked >= 5
