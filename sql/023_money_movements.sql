-- Money movements beyond capture and refund: refund reversals, chargebacks and their
-- reversals, and the claims that net a payment's follow-ups. Idempotent: safe to apply
-- again.

-- 1. Every movement but a capture has its own id (the refund's, the dispute's, the
--    operator's adjustment id), kept in `refund_id` (named when refunds were the only
--    such movement).
ALTER TABLE settlements DROP CONSTRAINT IF EXISTS settlements_kind_check;
ALTER TABLE settlements ADD CONSTRAINT settlements_kind_check
    CHECK (kind IN ('capture', 'refund', 'refund_reversal', 'chargeback', 'chargeback_reversal',
                    'credit_adjustment', 'debit_adjustment', 'payout'));
ALTER TABLE settlements DROP CONSTRAINT IF EXISTS settlements_refund_has_id;
ALTER TABLE settlements ADD CONSTRAINT settlements_refund_has_id
    CHECK ((kind = 'capture') = (refund_id IS NULL));

-- 2. Each payment's follow-ups as claims (gateway.core.follow_ups): what each said and
--    what it moved, in the payment's currency and in the ledger's. A claim is written
--    in the same transaction as its pending settlement row, under an advisory lock on
--    its payment, so two workers never net the same payment at once. A claim that
--    moved nothing (a refund a running total had already moved, a reversal before what
--    it reverses) is recorded all the same: later claims are netted against it.
CREATE TABLE IF NOT EXISTS payment_claims (
    settlement_id    text        NOT NULL,  -- the payment
    kind             text        NOT NULL
                     CHECK (kind IN ('refund', 'refund_reversal', 'chargeback', 'chargeback_reversal')),
    claim_key        text        NOT NULL,  -- the movement's own id; `refunded:TOTAL` for a total
    amount_minor     bigint      NOT NULL CHECK (amount_minor > 0),
    currency         text        NOT NULL,
    cumulative       boolean     NOT NULL DEFAULT false,
    due_minor        bigint      NOT NULL CHECK (due_minor >= 0),
    ledger_due_minor bigint      NOT NULL CHECK (ledger_due_minor >= 0),
    transfer_id      numeric(39,0) NOT NULL, -- its transfer's id (posted only if ledger_due_minor > 0)
    provider         text        NOT NULL,
    source_event_id  text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (settlement_id, kind, claim_key)
);
-- `gateway reconcile` asks whether an event's movement netted to nothing, by transfer id.
CREATE INDEX IF NOT EXISTS payment_claims_transfer_idx ON payment_claims (transfer_id);

-- 3. Merchant accounts have no debit limit: money the provider has already taken back
--    (a refund, a chargeback) is posted even when the merchant was paid out, and shows
--    as a negative balance. TigerBeetle accounts cannot change their flags; see
--    docs/operations.md ("Negative merchants").
UPDATE ledger_accounts SET debits_must_not_exceed_credits = false
WHERE code = 1 AND debits_must_not_exceed_credits;

-- 4. Operators' correcting entries (`gateway ledger adjust`): who, why, and what; the
--    transfer is a `settlements` row of kind credit_ or debit_adjustment under the same
--    id, so statements and checks read adjustments like every other movement.
CREATE TABLE IF NOT EXISTS ledger_adjustments (
    adjustment_id text        PRIMARY KEY,
    merchant_id   text        NOT NULL,
    amount_minor  bigint      NOT NULL CHECK (amount_minor <> 0),  -- + to the merchant
    currency      text        NOT NULL,
    reason        text        NOT NULL CHECK (reason <> ''),
    note          text,
    actor         text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);

-- 5. A merchant's statement, transfer list and export read its settlements in the order
--    they were recorded (keyset on id). `id` never changes after the insert, so this
--    index keeps the pending -> settled update a HOT update (sql/013).
CREATE INDEX IF NOT EXISTS settlements_merchant_idx ON settlements (merchant_id, id);
