"""A command reads only the secrets it uses (finding 14): with a production-style
configuration, every provider's secret, service token, API key and forward secret named
by an environment variable and none of them set, `gateway dlq list` and `gateway ledger
balances` run and print their answer, while `gateway serve`, which verifies with them,
still refuses to start, naming the first one missing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import asyncpg
import pytest

from tests.support.cli import Result, invoke, run
from tests.support.config_file import write_toml
from tests.support.dead_letters import park
from tests.support.processes import clean_env
from tests.support.services import free_port


def production_config(database_url: str, nats_url: str) -> dict[str, Any]:
    """Every secret named by a variable, as a production file names them."""
    return {
        "database": {"url": database_url},
        "nats": {"url": nats_url},
        "http": {"port": free_port()},
        "providers": {
            "stripe": {"scheme": "stripe", "secret_env": "STRIPE_WEBHOOK_SECRET"},
            "github": {
                "scheme": "github",
                "secret_env": "GITHUB_WEBHOOK_SECRET",
                "api_key_env": "GITHUB_API_TOKEN",
                "repo": "acme/shop",
                "hook_id": 7,
            },
        },
        "services": {
            "billing": {"token_env": "BILLING_TOKEN", "subjects": ["events.billing.>"]},
        },
        "forward": {"crm": {"url": "https://crm.example.com/hooks", "secret_env": "CRM_SECRET"}},
    }


def no_secrets() -> dict[str, str]:
    """The environment with none of the file's secrets (and no GATEWAY_* variable)."""
    named = {"STRIPE_WEBHOOK_SECRET", "GITHUB_WEBHOOK_SECRET", "GITHUB_API_TOKEN"}
    named |= {"BILLING_TOKEN", "CRM_SECRET"}
    return {k: v for k, v in clean_env().items() if k not in named}


def gateway(*args: str) -> Result:
    """`gateway ARGS` with none of the file's secrets in the environment."""
    return invoke(*args, env=no_secrets())


@pytest.fixture
def cfg(tmp_path: Path, database_url: str, nats_url: str) -> str:
    return str(write_toml(tmp_path / "gateway.toml", production_config(database_url, nats_url)))


async def test_dlq_list_runs_with_no_secret_in_the_environment(cfg: str, database_url: str) -> None:
    """The operator on a bastion host with read access only: the list, with its row."""
    conn = await asyncpg.connect(database_url)
    try:
        await park(conn, "evt_no_secrets", error_class="UNKNOWN_MERCHANT")
    finally:
        await conn.close()
    listed = gateway("dlq", "list", "--config", cfg)
    print(listed.stdout)  # what the operator sees, in the test's report
    assert listed.returncode == 0, listed.stderr
    assert "evt_no_secrets" in listed.stdout
    assert "UNKNOWN_MERCHANT" in listed.stdout
    assert listed.stderr == ""


async def test_ledger_balances_runs_with_no_secret_in_the_environment(cfg: str) -> None:
    balances = gateway("ledger", "balances", "--config", cfg, "--json")
    assert balances.returncode == 0, balances.stderr
    assert balances.stdout.strip().startswith(("[", "{"))


async def test_serve_still_refuses_to_start_without_a_providers_secret(cfg: str) -> None:
    """Start-up validation is as strict as before where the secrets are used."""
    served = run("serve", "--config", cfg, env=no_secrets())
    assert served.returncode == 2
    assert "providers.stripe.secret_env" in served.stderr
    assert "STRIPE_WEBHOOK_SECRET is not set" in served.stderr


async def test_forward_still_refuses_to_start_without_its_own_secret(cfg: str) -> None:
    forwarded = run("forward", "--name", "crm", "--config", cfg, env=no_secrets())
    assert forwarded.returncode == 2
    assert "forward.crm.secret_env" in forwarded.stderr
