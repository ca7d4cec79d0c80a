"""Which secrets a command reads (`gateway.settings.secrets`): each `*_env` secret is
read only inside the command's scope; outside it, nothing is read and nothing is
refused for being unset, the rest of the table is still checked, and what is left
authenticates or signs nothing (finding 14)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.errors import ConfigError, Unauthorized
from gateway.ingest.endpoints import authenticate
from gateway.settings import parse
from gateway.settings.secrets import EVERY_SECRET, NO_SECRET, SecretScope, secrets_under
from tests.support.config_file import with_urls

STANDARD_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def doc() -> dict[str, Any]:
    return with_urls(
        {
            "providers": {
                "stripe": {"scheme": "stripe", "secret_env": "STRIPE_SECRET"},
                "github": {
                    "scheme": "github",
                    "secrets": ["inline-github-secret"],
                    "api_key_env": "GITHUB_TOKEN",
                    "repo": "acme/shop",
                    "hook_id": 7,
                },
            },
            "services": {
                "billing": {"token_env": "BILLING_TOKEN", "subjects": ["events.billing.>"]}
            },
            "forward": {
                "crm": {"url": "https://crm.example.com/h", "secret_env": "CRM_SECRET"},
                "erp": {"url": "https://erp.example.com/h", "secret_env": "ERP_SECRET"},
            },
        }
    )


FULL_ENV = {
    "STRIPE_SECRET": "whsec_stripe",
    "GITHUB_TOKEN": "ghp_token",
    "BILLING_TOKEN": "billing-token",
    "CRM_SECRET": STANDARD_SECRET,
    "ERP_SECRET": STANDARD_SECRET,
}


@pytest.mark.parametrize(
    ("key", "inside"),
    [
        ("providers.stripe.secret_env", EVERY_SECRET),
        ("forward.crm.secret_env", secrets_under("forward.")),
        ("forward.crm.secret_env", secrets_under("forward.crm.")),
    ],
)
def test_a_scope_reads_the_keys_under_its_prefixes(key: str, inside: SecretScope) -> None:
    """Every key for `EVERY_SECRET`; a prefix's own keys for `secrets_under`."""
    assert inside.reads(key)


@pytest.mark.parametrize(
    ("key", "outside"),
    [
        ("providers.stripe.secret_env", NO_SECRET),
        ("forward.erp.secret_env", secrets_under("forward.crm.")),
        ("forward.crmx.secret_env", secrets_under("forward.crm.")),
    ],
)
def test_a_scope_reads_nothing_else(key: str, outside: SecretScope) -> None:
    """No key for `NO_SECRET`; not a neighbour whose name merely starts the same."""
    assert not outside.reads(key)


def test_no_secret_parses_with_an_empty_environment() -> None:
    """The inspecting commands' scope: nothing read, nothing refused; the inline secret
    stays, the unread ones are empty."""
    settings = parse(doc(), env={}, secrets=NO_SECRET)
    assert settings.providers["stripe"].params.secrets == ()
    assert settings.providers["github"].params.secrets == ("inline-github-secret",)
    assert settings.providers["github"].api is not None
    assert settings.providers["github"].api.key == ""
    assert settings.services["billing"].token == ""
    assert settings.forward["crm"].secrets == () == settings.forward["erp"].secrets


def test_every_secret_is_read_when_set() -> None:
    settings = parse(doc(), env=FULL_ENV, secrets=EVERY_SECRET)
    assert settings.providers["stripe"].params.secrets == ("whsec_stripe",)
    assert settings.services["billing"].token == "billing-token"
    assert settings.forward["erp"].secrets == (STANDARD_SECRET,)


@pytest.mark.parametrize(
    ("unset", "key"),
    [
        ("STRIPE_SECRET", "providers.stripe.secret_env"),
        ("GITHUB_TOKEN", "providers.github.api_key_env"),
        ("BILLING_TOKEN", "services.billing.token_env"),
        ("CRM_SECRET", "forward.crm.secret_env"),
    ],
)
def test_every_secret_refuses_start_up_without_any_one(unset: str, key: str) -> None:
    """`gateway serve`'s scope (and the default): as strict as before."""
    env = {k: v for k, v in FULL_ENV.items() if k != unset}
    with pytest.raises(ConfigError) as refused:
        parse(doc(), env=env)
    assert refused.value.key == key


def test_one_destination_reads_its_own_secret_alone() -> None:
    """`gateway forward --name crm`: its secret is required, the other's not read."""
    settings = parse(
        doc(), env={"CRM_SECRET": STANDARD_SECRET}, secrets=secrets_under("forward.crm.")
    )
    assert settings.forward["crm"].secrets == (STANDARD_SECRET,)
    assert settings.forward["erp"].secrets == ()
    with pytest.raises(ConfigError) as refused:
        parse(doc(), env={}, secrets=secrets_under("forward.crm."))
    assert refused.value.key == "forward.crm.secret_env"


def test_the_rest_of_a_table_is_still_checked_outside_the_scope() -> None:
    """A secret not read does not excuse the table: no secret at all, or an empty
    variable name, is still refused."""
    no_secret = doc()
    del no_secret["providers"]["stripe"]["secret_env"]
    with pytest.raises(ConfigError) as refused:
        parse(no_secret, env={}, secrets=NO_SECRET)
    assert refused.value.key == "providers.stripe.secrets"
    empty_name = doc()
    empty_name["services"]["billing"]["token_env"] = ""
    with pytest.raises(ConfigError) as refused:
        parse(empty_name, env={}, secrets=NO_SECRET)
    assert refused.value.key == "services.billing.token_env"


@pytest.mark.parametrize("header", ["Bearer  ", "Bearer \t", "Bearer x"])
def test_a_token_not_read_authenticates_nothing(header: str) -> None:
    """Fail closed: an unread (empty) token never matches, not even an empty bearer."""
    settings = parse(doc(), env={}, secrets=NO_SECRET)
    with pytest.raises(Unauthorized):
        authenticate(settings.services, header)
