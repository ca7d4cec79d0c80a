"""Which secrets a command reads from its environment.

A secret named by `secret_env`, `token_env` or `api_key_env` is read from the
environment only by the commands that use it: `gateway serve` verifies every provider's
signatures and authenticates every service, so it reads them all and refuses to start
without any one of them; `gateway dlq list` uses none, so it runs on a host that holds
none. A secret a command does not read is left out of its settings (an empty tuple of
secrets, an empty token or API key): a verifier built from it accepts nothing and a
signer refuses to sign, so a mistake here fails closed, never open.

Everything else about such a key is still checked: that it names a variable, that the
table holds a secret at all, and the scheme's own parameters.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SecretScope:
    """The secrets one command reads, by the settings key that names each: a key is read
    when it starts with one of `prefixes` (`""` matches every key)."""

    prefixes: tuple[str, ...]

    def reads(self, key: str) -> bool:
        """Whether the secret named at settings key `key` (such as
        `providers.stripe.secret_env`) is read from the environment."""
        return key.startswith(self.prefixes)  # an empty tuple matches nothing


#: Every secret the file names: `gateway serve`, and any caller that does not say.
EVERY_SECRET = SecretScope(("",))
#: None: the inspecting commands (`dlq list`, `ledger balances`, `settle`, ...).
NO_SECRET = SecretScope(())


def secrets_under(*prefixes: str) -> SecretScope:
    """The secrets named under these settings keys, such as `forward.crm.` (one
    destination's) or `providers.stripe.secret_env` (one provider's signing secret)."""
    return SecretScope(tuple(prefixes))
