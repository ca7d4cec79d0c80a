-- Authorisations: two-phase transfers in the embedded ledger, as TigerBeetle has them,
-- and the settlement kinds that use them. Idempotent: safe to apply again.

-- 1. What pending transfers reserve, per account (TigerBeetle's debits_pending and
--    credits_pending): counted against an account's limit, not in its balance.
ALTER TABLE ledger_accounts
    ADD COLUMN IF NOT EXISTS debits_pending  numeric(39,0) NOT NULL DEFAULT 0 CHECK (debits_pending >= 0),
    ADD COLUMN IF NOT EXISTS credits_pending numeric(39,0) NOT NULL DEFAULT 0 CHECK (credits_pending >= 0);

-- 2. A transfer's phase: single (moves at once), pending (reserves), post or void (resolves
--    the pending transfer `pending_id` names). A pending transfer is resolved once: the
--    unique index is the backstop of the check the ledger makes before it inserts.
ALTER TABLE ledger_transfers
    ADD COLUMN IF NOT EXISTS phase      text          NOT NULL DEFAULT 'single',
    ADD COLUMN IF NOT EXISTS pending_id numeric(39,0);
ALTER TABLE ledger_transfers DROP CONSTRAINT IF EXISTS ledger_transfers_phase_check;
ALTER TABLE ledger_transfers ADD CONSTRAINT ledger_transfers_phase_check
    CHECK (phase IN ('single', 'pending', 'post', 'void')
           AND (phase IN ('post', 'void')) = (pending_id IS NOT NULL));
CREATE UNIQUE INDEX IF NOT EXISTS ledger_transfers_pending_idx
    ON ledger_transfers (pending_id) WHERE pending_id IS NOT NULL;

-- 3. Authorisations and voids, dispute fees and their returns, are settlements of their payment (keyed by it, in
--    `refund_id` as every movement but the capture), and claims when they move nothing
--    (an authorisation after its capture, a void with nothing to void).
ALTER TABLE settlements DROP CONSTRAINT IF EXISTS settlements_kind_check;
ALTER TABLE settlements ADD CONSTRAINT settlements_kind_check
    CHECK (kind IN ('capture', 'refund', 'refund_reversal', 'chargeback', 'chargeback_reversal',
                    'credit_adjustment', 'debit_adjustment', 'payout', 'authorisation', 'void',
                    'dispute_fee', 'dispute_fee_reversal'));
ALTER TABLE payment_claims DROP CONSTRAINT IF EXISTS payment_claims_kind_check;
ALTER TABLE payment_claims ADD CONSTRAINT payment_claims_kind_check
    CHECK (kind IN ('refund', 'refund_reversal', 'chargeback', 'chargeback_reversal',
                    'authorisation', 'void'));

-- 4. The exchange result of a refund or dispute of a converted payment: posted at the
--    payment's rate, worth `fx_minor` more (or less) at today's `current_rate`, which the
--    FX account takes (gateway.core.settlement.fx_transfer). Fixed with the claim, so a
--    retry posts the same difference whatever the rate did since.
ALTER TABLE payment_claims
    ADD COLUMN IF NOT EXISTS fx_minor     bigint  NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS current_rate numeric;

-- 5. The payment providers' event types that moved no money, as the settle processes
--    counted them (`gateway_settlement_unmapped_total` is per process and in memory):
--    flushed every few seconds, so the console's overview can name them. Bounded like
--    the metric: a process keeps at most 500 pairs, the rest under type 'other'.
CREATE TABLE IF NOT EXISTS settlement_unmapped (
    provider   text        NOT NULL,
    event_type text        NOT NULL,
    events     bigint      NOT NULL CHECK (events > 0),
    first_seen timestamptz NOT NULL DEFAULT now(),
    last_seen  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, event_type)
);
