"""schemathesis against the whole console admin API of a live console, over loopback:
requests generated from `gateway.console.api_doc.document()` (every operation, every
tag: its examples, boundary and negative values, then random ones, with a fixed seed and
a bounded number of examples each), and every answer checked: no 5xx, a documented
status, content type and headers, and a body the documented schema accepts.

The token is an admin's, so every operation is allowed and its answer is the
operation's own, not a 403. The database holds dead letters (open and resolved, one of
them holding an ordering key), events, a held key, jobs, an audit row and a merchant's
ledger account, so lists and details have something in them.

Each unsafe call (every POST) is also checked for what it changed (`state_digest`,
every table): an answer that is not a 2xx changed nothing but audit rows that are not
`ok` (a refused action is audited); a 2xx changed only the tables its operation writes.
The fuzzer does make real changes with the valid requests it sends, and that is fine:
it issues tokens (and revokes one of them), plans replays, cancels and retries the
seeded jobs, resolves the open dead letters (the one holding the key releases it), and
posts adjustments to the seeded merchant. The
token it calls with has a name the generators do not reach, so it is never revoked.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import httpx
import pytest
import schemathesis

from gateway.adapters.postgres import Conn
from gateway.adapters.postgres import replay_jobs as store
from gateway.console.api_doc import document
from gateway.core.console.roles import Role
from gateway.core.ledger.ids import merchant_account
from gateway.core.replay.jobs import JobKind, NewJob
from tests.support.console import state_digest
from tests.support.console_live import LiveConsole, checks, new_token, serve_console

if TYPE_CHECKING:
    from schemathesis.specs.openapi.schemas import OpenApiCase

#: The admin's token, made here so schemathesis sends it as the document's `bearer`
#: scheme (and knows the request carries it; passed as a plain header, a generated case
#: without it would count as invalid however the server answers).
TOKEN = new_token()
#: Bounded and reproducible: the same requests on every run.
SETTINGS = {
    "auth": {"openapi": {"bearer": {"bearer": TOKEN}}},
    "seed": 20261201,
    "generation": {"mode": "all", "max-examples": 30, "deterministic": True},
    "phases": {"stateful": {"enabled": False}},
}
SCHEMA = schemathesis.openapi.from_dict(document(), config=schemathesis.Config.from_dict(SETTINGS))

API = "/console/api/v1"
CHECKS = checks()
#: Checks left out where the server validates what the document gives in words alone,
#: by operation. `positive_data_acceptance` (a request the document allows is never
#: refused) goes where a `cursor` is taken: it is opaque, and only one the console gave
#: out is valid; where a filter is read by the DLQ or events parser (a stage, a time, a
#: type pattern), or the audit list's (its times); and where a resolve's note must be
#: printable (Unicode categories, which a pattern cannot say). `negative_data_rejection`
#: (a request it forbids is refused) goes too where the DLQ list's and the audit list's
#: parsers read the query as their page's GET form sends it (a blank value is no
#: filter, spaces around a number are dropped), and where a replay's body is read as
#: the replay form is (null for absent, a number in the filter as its text).
_IN_WORDS = checks(without=("positive_data_acceptance",))
_FORM_PARSER = checks(without=("positive_data_acceptance", "negative_data_rejection"))
CHECKS_FOR = {
    f"GET {API}/audit": _FORM_PARSER,
    f"GET {API}/dlq": _FORM_PARSER,
    f"POST {API}/dlq/{{id}}/resolve": _IN_WORDS,
    f"GET {API}/events": _IN_WORDS,
    f"GET {API}/keys": _IN_WORDS,
    f"GET {API}/ledger/balances": _IN_WORDS,
    f"GET {API}/ledger/statement": _IN_WORDS,
    f"GET {API}/ledger/transfers": _IN_WORDS,
    # An entry's fields are read as the adjustment form reads them (spaces around dropped,
    # printable text): the document's lengths and patterns say less than that.
    f"POST {API}/ledger/adjustments": _FORM_PARSER,
    f"GET {API}/replays": _IN_WORDS,
    f"GET {API}/replays/{{job_id}}/items": _IN_WORDS,
    f"POST {API}/replays": _FORM_PARSER,
}

#: The tables a 2xx of each unsafe operation may change (besides the audit trail).
WRITES: dict[str, set[str]] = {
    # Resolving the dead letter that holds a key releases the key too.
    f"POST {API}/dlq/{{id}}/resolve": {"dlq_webhooks", "order_applied", "order_log"},
    f"POST {API}/keys/release": {"dlq_webhooks", "order_applied", "order_log"},
    # The entry, its movement, its transfer, and the adjustments account opened for it.
    f"POST {API}/ledger/adjustments": {
        "ledger_adjustments",
        "settlements",
        "ledger_transfers",
        "ledger_accounts",
        "ledger_account_names",
    },
    f"POST {API}/replays": {"replay_jobs", "replay_job_items"},
    f"POST {API}/replays/{{job_id}}/cancel": {"replay_jobs", "replay_job_items"},
    f"POST {API}/replays/{{job_id}}/pause": {"replay_jobs"},
    f"POST {API}/replays/{{job_id}}/resume": {"replay_jobs"},
    f"POST {API}/replays/{{job_id}}/retry": {"replay_jobs", "replay_job_items"},
    f"POST {API}/tokens": {"console_tokens"},
    f"POST {API}/tokens/{{name}}/revoke": {"console_tokens", "console_sessions"},
}

_OPERATIONS = {f"{m.upper()} {p}" for p, ops in document()["paths"].items() for m in ops}
assert set(CHECKS_FOR) | set(WRITES) <= _OPERATIONS, "a label above names no operation"
assert {o for o in _OPERATIONS if o.startswith("POST ")} == set(WRITES)

_SEED = """
INSERT INTO processed_webhooks (provider, event_id, event_type, subject, body, headers,
                                order_key, key_seq, published_at)
VALUES ('stripe', 'evt_1', 'payment_intent.succeeded',
        'webhooks.stripe.payment_intent.succeeded', '{"id": "evt_1"}',
        '{"stripe-signature": "t=1,v1=00"}', 'pi_1', 1, now()),
       ('stripe', 'evt_2', 'charge.refunded', 'webhooks.stripe.charge.refunded',
        '{"id": "evt_2"}', '{}', 'pi_1', 2, now()),
       ('github', 'gh_1', 'push', 'webhooks.github.push', '\\x00ff7b', '{}', NULL, NULL,
        NULL);
INSERT INTO dlq_webhooks (webhook_id, stage, provider, event_id, subject, error_class,
                          error_message, error_detail, payload, headers, order_key,
                          key_seq, attempts)
VALUES (1, 'settlement', 'stripe', 'evt_1', 'webhooks.stripe.payment_intent.succeeded',
        'SCHEMA_INVALID', 'amount missing', 'Traceback (most recent call last): ...',
        '{"id": "evt_1"}', '{"stripe-signature": "t=1,v1=00"}', 'pi_1', 1, 3),
       (2, 'settlement', 'stripe', 'evt_2', 'webhooks.stripe.charge.refunded',
        'ORDER_HELD', 'held behind 1', NULL, '{"id": "evt_2"}', '{}', 'pi_1', 2, 1),
       (NULL, 'ingest', 'stripe', 'evt_x', NULL, 'SIGNATURE_INVALID', 'bad signature',
        NULL, '\\x00ff', '{"authorization": "secret"}', NULL, NULL, 1),
       (3, 'publish', 'github', 'gh_1', 'webhooks.github.push', 'PUBLISH_FAILED',
        'timeout', NULL, '\\x00ff7b', '{}', NULL, NULL, 2);
UPDATE dlq_webhooks SET is_resolved = true, resolved_at = now(), resolution = 'manual',
       resolved_by = 'console:seed', resolution_note = 'seeded'
 WHERE id = 4;
INSERT INTO order_applied (provider, order_key, applied_seq, held_seq, held_dlq_id,
                           hold_reason, held_at)
VALUES ('stripe', 'pi_1', 0, 1, 1, 'SCHEMA_INVALID', now());
INSERT INTO console_audit (actor, role, via, action, target, outcome)
VALUES ('console:seed', 'admin', 'cli', 'token.create', 'token:seed', 'ok');
"""


async def _seed(conn: Conn) -> None:
    await conn.execute(_SEED)
    # Merchant m_1's USD account (the document's example entry adjusts it).
    account = merchant_account("m_1", "USD")
    await conn.execute(
        "INSERT INTO ledger_accounts (id, ledger, code) VALUES ($1::text::numeric, $2, $3)",
        str(account.id), account.ledger, int(account.code),
    )  # fmt: skip
    await conn.execute(
        "INSERT INTO ledger_account_names (id, kind, owner, currency)"
        " VALUES ($1::text::numeric, 'merchant', 'm_1', 'USD')",
        str(account.id),
    )
    await store.create_job(conn, NewJob(JobKind.DLQ, "console:seed", {"ids": [1, 2]}, (1, 2)))
    await store.create_job(conn, NewJob(JobKind.DLQ, "console:seed", {"ids": [3]}, (3,)))
    await conn.execute("UPDATE replay_jobs SET state = 'running', started_at = now() WHERE id = 2")


@pytest.fixture(scope="module")
def live(template_db: str) -> Iterator[LiveConsole]:
    """A console with every kind of row, and an admin's token."""
    with serve_console(
        template_db,
        role=Role.ADMIN,
        seed=_seed,
        # Past what the generators write for a token's name: the fuzzer never revokes it.
        name="schemathesis-admin-0f3c9d",
        token=TOKEN,
        prefix="gw_api",
    ) as live:
        yield live


async def _state(live: LiveConsole) -> tuple[dict[str, str], int]:
    digest = await state_digest(live.pool)
    async with live.pool.acquire() as conn:
        last = await conn.fetchval("SELECT coalesce(max(id), 0) FROM console_audit")
    return digest, last


async def _audited_since(live: LiveConsole, last: int) -> list[str]:
    async with live.pool.acquire() as conn:
        rows = await conn.fetch("SELECT outcome FROM console_audit WHERE id > $1", last)
    return [r["outcome"] for r in rows]


@SCHEMA.parametrize()
def test_the_console_api_answers_as_documented(case: OpenApiCase, live: LiveConsole) -> None:
    label = f"{case.method.upper()} {case.operation.path}"
    if case.method.upper() == "GET":  # reads nothing but the audit trail's payload views
        response = case.call(base_url=live.base_url, timeout=10)
        case.validate_response(response, checks=CHECKS_FOR.get(label, CHECKS))
        return
    before, last = live.run(_state(live))
    response = case.call(base_url=live.base_url, timeout=10)
    after, _ = live.run(_state(live))
    changed = {t for t in before if before[t] != after.get(t)} - {"console_audit"}
    outcomes = live.run(_audited_since(live, last))
    if 200 <= response.status_code < 300:
        wrote = WRITES.get(label, set())
        assert changed <= wrote, f"{label} {response.status_code} changed {sorted(changed)}"
    else:
        assert not changed, f"{label} {response.status_code} changed {sorted(changed)}"
        assert "ok" not in outcomes, f"{label} {response.status_code} audited {outcomes}"
    case.validate_response(response, checks=CHECKS_FOR.get(label, CHECKS))


def test_a_token_name_with_a_trailing_newline_is_a_bad_request(live: LiveConsole) -> None:
    """A `$` in the name's check let "ci-bot\\n" past to the table's own check: a 500."""
    r = httpx.post(
        f"{live.base_url}{API}/tokens",
        json={"name": "ci-bot\n", "role": "viewer"},
        headers=live.headers,
        timeout=10,
    )
    assert r.status_code == 400, r.text
    assert r.headers["content-type"] == "application/problem+json"


def test_the_fuzzers_own_token_is_still_live(live: LiveConsole) -> None:
    """Run after the fuzzing (defined after it): of the tokens it issued and revoked,
    none was the one it called with."""

    async def revoked() -> bool:
        async with live.pool.acquire() as conn:
            return bool(
                await conn.fetchval(
                    "SELECT revoked_at IS NOT NULL FROM console_tokens WHERE name = $1",
                    live.token_name,
                )
            )

    assert not live.run(revoked())
