-- Whose each ledger account is. Account ids are 128-bit hashes of (kind, owner, currency)
-- (gateway.core.settlement) that neither ledger backend can turn back into a name, and
-- TigerBeetle keeps only numbers; the names are kept here, for both backends, written
-- before the account is created (`gateway ledger open-account`, the worker's clearing
-- accounts). A row whose name does not hash to its id is ignored when read.

CREATE TABLE IF NOT EXISTS ledger_account_names (
    id         numeric(39,0) PRIMARY KEY,
    kind       text          NOT NULL CHECK (kind IN ('merchant', 'clearing')),
    owner      text          NOT NULL,  -- merchant id, or the clearing account's source
    currency   text          NOT NULL,
    created_at timestamptz   NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS ledger_account_names_owner_idx ON ledger_account_names (owner);
