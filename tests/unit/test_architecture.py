"""The layout rules of the README's package map, read from the source of `gateway/`.

Each rule is also shown to fail: a small tree written to break it must be reported.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.architecture import check

ROOT = Path(__file__).resolve().parents[2]


def test_the_gateway_keeps_its_layout_rules() -> None:
    """core is pure, only adapters touch drivers and SQL, ingest stands alone, no
    cycles between modules or between packages, no registration by import, nothing
    imports cli, only cli imports the wiring, cli imports no adapters, and every logger
    is named after its module."""
    assert check(ROOT, "gateway") == []


def write_tree(root: Path, files: dict[str, str]) -> None:
    for name, source in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source), encoding="utf-8")


# A tree that keeps every rule, and one change to it per broken rule.
GOOD = {
    "pkg/__init__.py": "",
    "pkg/errors.py": "class PkgError(Exception): ...\n",
    "pkg/core/__init__.py": "",
    "pkg/core/rules.py": "import decimal\nfrom pkg.errors import PkgError\n",
    "pkg/adapters/__init__.py": "",
    "pkg/adapters/store.py": 'import asyncpg\nQUERY = "SELECT id FROM t WHERE x = $1"\n',
    "pkg/ingest/__init__.py": "",
    "pkg/ingest/app.py": "from pkg.core import rules\nfrom pkg.adapters import store\n",
    "pkg/settlement/__init__.py": "",
    "pkg/settlement/worker.py": "from pkg.core import rules\n",
    "pkg/wiring/__init__.py": "",
    "pkg/wiring/run.py": "import httpx\nfrom pkg.ingest import app\n",
    "pkg/metrics/__init__.py": "from prometheus_client import Counter\n",
    "pkg/tracing/__init__.py": "def on():\n    from pkg.tracing import otel\n",
    "pkg/tracing/otel.py": "from opentelemetry import trace\n",
    "pkg/cli/__init__.py": "from pkg.wiring import run\n",
    "pkg/__main__.py": "from pkg.cli import run\n",
    "pkg/console/__init__.py": "",
    "pkg/console/app.py": "from pkg.core import rules\nfrom pkg.dlq import plan\n",
    "pkg/dlq/__init__.py": "",
    "pkg/dlq/plan.py": "from pkg.core import rules\n",
    "pkg/dlq/replay.py": "from pkg.settlement import worker\n",
    "pkg/dlq/settlement_handler.py": "from pkg.settlement import worker\n",
}

BROKEN = [
    (
        "pkg/console/app.py",
        "def f():\n    from pkg.ingest import app\n",
        "the console never loads pkg.ingest: pkg.console.app -> pkg.ingest",
    ),
    (
        "pkg/dlq/plan.py",
        "from pkg.dlq import replay\n",
        "the console never loads pkg.dlq.replay: pkg.console.app -> pkg.dlq.plan -> pkg.dlq.replay",
    ),
    (
        "pkg/dlq/__init__.py",
        "from pkg.dlq import settlement_handler\n",
        "the console never loads pkg.dlq.settlement_handler: pkg.console.app -> pkg.dlq"
        " -> pkg.dlq.settlement_handler",
    ),
    (
        "pkg/console/app.py",
        "from pkg.wiring import run\n",
        "the console never loads pkg.ingest.app: pkg.console.app -> pkg.wiring.run"
        " -> pkg.ingest.app",
    ),
    ("pkg/core/rules.py", "import socket\n", "core does no I/O: pkg.core.rules:1 imports socket"),
    (
        "pkg/core/rules.py",
        "from pkg.adapters import store\n",
        "core does no I/O: pkg.core.rules:1 imports pkg.adapters.store",
    ),
    (
        "pkg/ingest/app.py",
        "import nats\n",
        "only adapters import drivers: pkg.ingest.app:1 imports nats",
    ),
    (
        "pkg/settlement/worker.py",
        "def f():\n    import redis.asyncio\n",
        "only adapters import drivers: pkg.settlement.worker:2 imports redis.asyncio",
    ),
    (
        "pkg/ingest/app.py",
        "import httpx\n",
        "only adapters, the wiring and the client import httpx: pkg.ingest.app:1 imports httpx",
    ),
    (
        "pkg/settlement/worker.py",
        "from prometheus_client.multiprocess import mark_process_dead\n",
        "only metrics imports prometheus_client: pkg.settlement.worker:1 imports "
        "prometheus_client.multiprocess",
    ),
    (
        "pkg/ingest/app.py",
        "from opentelemetry.trace import get_current_span\n",
        "only tracing imports opentelemetry: pkg.ingest.app:1 imports opentelemetry.trace",
    ),
    (
        "pkg/settlement/worker.py",
        "def f():\n    import opentelemetry\n",
        "only tracing imports opentelemetry: pkg.settlement.worker:2 imports opentelemetry",
    ),
    (
        "pkg/ingest/app.py",
        "from pkg.settlement import worker\n",
        "ingest never imports settlement or dlq: pkg.ingest.app:1 imports pkg.settlement.worker",
    ),
    (
        "pkg/settlement/worker.py",
        "from pkg.cli import run\n",
        "nothing imports cli: pkg.settlement.worker:1 imports pkg.cli",
    ),
    (
        "pkg/cli/__init__.py",
        "from pkg.wiring import run\nfrom pkg.adapters import store\n",
        "cli imports no adapters: pkg.cli:2 imports pkg.adapters.store",
    ),
    (
        "pkg/cli/__init__.py",
        "def f():\n    import pkg.adapters.store\n",
        "cli imports no adapters: pkg.cli:2 imports pkg.adapters.store",
    ),
    (
        "pkg/settlement/worker.py",
        'import logging\nlog = logging.getLogger("pkg.settle")\n',
        "a logger is named __name__: pkg.settlement.worker:2",
    ),
    (
        "pkg/settlement/worker.py",
        "from logging import getLogger\nlog = getLogger()\n",
        "a logger is named __name__: pkg.settlement.worker:2",
    ),
    (
        "pkg/settlement/worker.py",
        "import importlib\nimportlib.import_module('pkg.ingest.app')\n",
        "no registration by import side effect: pkg.settlement.worker:1 imports importlib",
    ),
    (
        "pkg/settlement/worker.py",
        "import importlib.util\n",
        "no registration by import side effect: pkg.settlement.worker:1 imports importlib.util",
    ),
    (
        "pkg/settlement/worker.py",
        "__import__('pkg.ingest.app')\n",
        "no registration by import side effect: pkg.settlement.worker:1",
    ),
    (
        "pkg/settlement/worker.py",
        'STATEMENT = "UPDATE accounts SET balance = $1"\n',
        "SQL lives in adapters: pkg.settlement.worker:1",
    ),
    (
        "pkg/core/rules.py",
        "from pkg.core import other\n",
        "import cycle: pkg.core.other -> pkg.core.rules",
    ),
    (
        "pkg/retention/task.py",
        "from pkg.core import rules\n",
        "a package has an __init__.py: pkg/retention",
    ),
    (
        "pkg/settlement/worker.py",
        "from pkg.wiring import run\n",
        "only cli imports the wiring: pkg.settlement.worker:1 imports pkg.wiring.run",
    ),
    (
        "pkg/dlq/plan.py",
        "def f():\n    import pkg.wiring\n",
        "only cli imports the wiring: pkg.dlq.plan:2 imports pkg.wiring",
    ),
    (
        # No module cycle (worker -> plan, replay -> worker), but the rooms lean on each
        # other: settlement -> dlq -> settlement.
        "pkg/settlement/worker.py",
        "from pkg.dlq import plan\n",
        "cycle between packages: pkg.dlq -> pkg.settlement",
    ),
]


def test_a_tree_that_keeps_the_rules_reports_nothing(tmp_path: Path) -> None:
    """The checker's negatives: the good tree, docstrings that mention SQL included, the
    parts of importlib that only read package data, a module's own logger, and the
    logging set-up that configures other loggers."""
    data = "import importlib.metadata\nfrom importlib.resources.abc import Traversable\n"
    logged = "import logging\nlog = logging.getLogger(__name__)\n"
    setup = "import logging\nlogging.getLogger().setLevel(logging.INFO)\n"
    write_tree(
        tmp_path,
        GOOD
        | {
            "pkg/ingest/doc.py": '"""SELECT id FROM t: why."""\n',
            "pkg/ingest/data.py": data,
            "pkg/ingest/logged.py": logged,
            "pkg/logs.py": setup,
        },
    )
    assert check(tmp_path, "pkg") == []


@pytest.mark.parametrize(("path", "source", "reported"), BROKEN)
def test_each_broken_rule_is_reported(
    tmp_path: Path, path: str, source: str, reported: str
) -> None:
    """Each rule fails when broken, with the module and line that broke it."""
    files = dict(GOOD)
    files[path] = source
    files["pkg/core/other.py"] = "from pkg.core import rules\n"
    write_tree(tmp_path, files)
    assert reported in check(tmp_path, "pkg")


def test_the_serving_path_loads_no_settlement_redis_or_tigerbeetle() -> None:
    """Building the `gateway serve` application (CLI included) leaves the settlement
    side unloaded; the integration test checks a running `gateway serve` too."""
    probe = textwrap.dedent(
        """
        import sys
        from gateway import cli
        from gateway.wiring.ingest import create_app
        from gateway.settings import parse
        from tests.support.config_file import with_urls
        cli.build_parser().parse_args(["serve"])
        doc = {"providers": {"s": {"scheme": "stripe", "secrets": ["x"]}}}
        create_app(parse(with_urls(doc), env={}))
        print("\\n".join(sorted(sys.modules)))
        """
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.split()
    unwanted = [
        m
        for m in loaded
        if m.split(".")[0] in {"redis", "tigerbeetle", "opentelemetry"}
        or m.startswith("gateway.settlement")
    ]
    assert "gateway.ingest.app" in loaded
    assert unwanted == []


def test_the_console_process_loads_no_ingest_settlement_or_replay() -> None:
    """Building the console's app as `gateway console` does (CLI included) leaves the
    ingest and settlement sides and the replay code unloaded."""
    probe = textwrap.dedent(
        """
        import sys
        from typing import Any, cast
        from gateway import cli
        from gateway.wiring import console as wiring_console
        from gateway.console.app import build_app
        from gateway.console.web import ConsoleDeps
        from gateway.settings import parse
        from tests.support.config_file import with_urls
        cli.build_parser().parse_args(["console"])
        build_app(ConsoleDeps(pool=cast(Any, None), settings=parse(with_urls({}), env={})))
        print("\\n".join(sorted(sys.modules)))
        """
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.split()
    unwanted = [
        m
        for m in loaded
        if m.startswith(("gateway.ingest", "gateway.settlement"))
        or m == "gateway.dlq.replay"
        or (m.startswith("gateway.dlq.") and m.endswith("_handler"))
    ]
    assert "gateway.console.app" in loaded and "gateway.wiring.console" in loaded
    assert unwanted == []
