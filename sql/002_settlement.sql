-- Settlement: where every payment stands, and the embedded double-entry ledger.
--
-- Ids and amounts that TigerBeetle keeps as u128 are numeric(39,0) here, so the same
-- values work with either backend. Balances are updated in the same transaction as the
-- transfer that moves them.

CREATE TABLE IF NOT EXISTS settlements (
    id                  bigserial PRIMARY KEY,
    transfer_id         numeric(39,0) NOT NULL,  -- deterministic, from kind + settlement/refund id
    kind                text          NOT NULL CHECK (kind IN ('capture', 'refund')),
    settlement_id       text          NOT NULL,  -- the payment; refunds name the payment they reverse
    refund_id           text,                    -- refunds only
    provider            text          NOT NULL,
    merchant_id         text          NOT NULL,
    source_event_id     text,
    state               text          NOT NULL DEFAULT 'pending'
                        CHECK (state IN ('pending', 'settled', 'failed')),
    amount_minor        bigint        NOT NULL CHECK (amount_minor > 0),
    currency            text          NOT NULL,
    -- Fixed on the first attempt and reused on redelivery, so a retry after a rate
    -- change posts the same transfer instead of colliding with the first one.
    ledger_amount_minor bigint        CHECK (ledger_amount_minor > 0),
    ledger_currency     text,
    rate_at_payment     numeric,
    error_class         text,                    -- the last failure, while pending or failed
    attempts            integer       NOT NULL DEFAULT 0,
    created_at          timestamptz   NOT NULL DEFAULT now(),
    updated_at          timestamptz   NOT NULL DEFAULT now(),
    settled_at          timestamptz,
    CONSTRAINT settlements_transfer_id_key UNIQUE (transfer_id),
    CONSTRAINT settlements_refund_has_id CHECK ((kind = 'refund') = (refund_id IS NOT NULL))
);

-- "Has this payment settled?" (asked before posting its refunds) and operators' look-ups.
CREATE INDEX IF NOT EXISTS settlements_settlement_id_idx ON settlements (settlement_id, kind);
CREATE INDEX IF NOT EXISTS settlements_open_idx ON settlements (updated_at) WHERE state <> 'settled';

CREATE TABLE IF NOT EXISTS ledger_accounts (
    id                             numeric(39,0) PRIMARY KEY
                                   CHECK (id > 0 AND id < 340282366920938463463374607431768211455),
    ledger                         bigint        NOT NULL CHECK (ledger > 0),  -- u32: the currency
    code                           integer       NOT NULL CHECK (code > 0),    -- u16: merchant, clearing
    debits_must_not_exceed_credits boolean       NOT NULL DEFAULT false,
    credits_must_not_exceed_debits boolean       NOT NULL DEFAULT false,
    debits_posted                  numeric(39,0) NOT NULL DEFAULT 0 CHECK (debits_posted >= 0),
    credits_posted                 numeric(39,0) NOT NULL DEFAULT 0 CHECK (credits_posted >= 0),
    created_at                     timestamptz   NOT NULL DEFAULT now(),
    -- A backstop: the ledger checks the flags before it moves money and answers
    -- exceeds_credits / exceeds_debits; these make a bug fail loudly instead.
    CONSTRAINT ledger_accounts_debits_limit
        CHECK (NOT debits_must_not_exceed_credits OR debits_posted <= credits_posted),
    CONSTRAINT ledger_accounts_credits_limit
        CHECK (NOT credits_must_not_exceed_debits OR credits_posted <= debits_posted),
    CONSTRAINT ledger_accounts_flags_exclusive
        CHECK (NOT (debits_must_not_exceed_credits AND credits_must_not_exceed_debits))
);

CREATE TABLE IF NOT EXISTS ledger_transfers (
    id                numeric(39,0) PRIMARY KEY
                      CHECK (id > 0 AND id < 340282366920938463463374607431768211455),
    debit_account_id  numeric(39,0) NOT NULL REFERENCES ledger_accounts (id),
    credit_account_id numeric(39,0) NOT NULL REFERENCES ledger_accounts (id),
    amount            numeric(39,0) NOT NULL CHECK (amount > 0),
    ledger            bigint        NOT NULL,
    code              integer       NOT NULL,
    settlement_id     text          NOT NULL,  -- user data: which settlement
    rate_at_payment   numeric       NOT NULL,  -- user data: the rate used
    created_at        timestamptz   NOT NULL DEFAULT now(),
    CONSTRAINT ledger_transfers_accounts_differ CHECK (debit_account_id <> credit_account_id)
);

CREATE INDEX IF NOT EXISTS ledger_transfers_debit_idx ON ledger_transfers (debit_account_id);
CREATE INDEX IF NOT EXISTS ledger_transfers_credit_idx ON ledger_transfers (credit_account_id);
CREATE INDEX IF NOT EXISTS ledger_transfers_settlement_idx ON ledger_transfers (settlement_id);

-- Ids of transfers refused for a reason that could change (account missing, funds short):
-- like TigerBeetle, the ledger refuses them for ever after (id_already_failed), so an id
-- never means "refused" at one time and "posted" at another.
CREATE TABLE IF NOT EXISTS ledger_failed_transfers (
    id        numeric(39,0) PRIMARY KEY,
    result    text          NOT NULL,
    failed_at timestamptz   NOT NULL DEFAULT now()
);
