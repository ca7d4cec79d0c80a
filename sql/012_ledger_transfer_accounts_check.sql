-- The embedded ledger's transfers name existing accounts: one check per statement
-- instead of two foreign keys checked row by row. Idempotent: safe to apply again.
--
-- The ledger (gateway.adapters.postgres.ledger) already locks a batch's accounts and
-- answers debit/credit_account_not_found before inserting, so the foreign keys were a
-- backstop only, and the dearest part of posting: each inserted row ran two look-ups
-- with a row lock (measured: about a quarter of PostgreSQL's CPU per settled event). A
-- batch insert now runs one anti-join over the rows it inserted. Accounts are never
-- deleted (TigerBeetle cannot delete one either); a delete of an account that transfers
-- name is refused, as the foreign keys refused it.

ALTER TABLE ledger_transfers
    DROP CONSTRAINT IF EXISTS ledger_transfers_debit_account_id_fkey,
    DROP CONSTRAINT IF EXISTS ledger_transfers_credit_account_id_fkey;

CREATE OR REPLACE FUNCTION ledger_transfers_accounts_exist() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (
        SELECT 1
        FROM (SELECT debit_account_id AS id FROM new_transfers
              UNION SELECT credit_account_id FROM new_transfers) AS named
        WHERE NOT EXISTS (SELECT 1 FROM ledger_accounts a WHERE a.id = named.id)
    ) THEN
        RAISE EXCEPTION 'a ledger transfer names an account that does not exist'
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NULL;
END $$;

-- DROP and CREATE rather than CREATE OR REPLACE TRIGGER, which PostgreSQL 13 lacks.
DROP TRIGGER IF EXISTS ledger_transfers_accounts_exist ON ledger_transfers;
CREATE TRIGGER ledger_transfers_accounts_exist
    AFTER INSERT ON ledger_transfers REFERENCING NEW TABLE AS new_transfers
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_transfers_accounts_exist();

CREATE OR REPLACE FUNCTION ledger_accounts_kept() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM ledger_transfers WHERE debit_account_id = OLD.id)
       OR EXISTS (SELECT 1 FROM ledger_transfers WHERE credit_account_id = OLD.id) THEN
        RAISE EXCEPTION 'ledger account % is named by transfers', OLD.id
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN OLD;
END $$;

DROP TRIGGER IF EXISTS ledger_accounts_kept ON ledger_accounts;
CREATE TRIGGER ledger_accounts_kept
    BEFORE DELETE ON ledger_accounts
    FOR EACH ROW EXECUTE FUNCTION ledger_accounts_kept();

-- What else the foreign keys refused: emptying the accounts under their transfers, an
-- account changing its id, and a transfer changing its accounts (transfers are never
-- updated: the ledger only inserts them).
CREATE OR REPLACE FUNCTION ledger_refuse(reason text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '%', reason USING ERRCODE = 'foreign_key_violation';
END $$;

CREATE OR REPLACE FUNCTION ledger_accounts_not_emptied() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM ledger_transfers) THEN
        PERFORM ledger_refuse('ledger accounts are named by transfers: not truncated');
    END IF;
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS ledger_accounts_not_emptied ON ledger_accounts;
CREATE TRIGGER ledger_accounts_not_emptied
    BEFORE TRUNCATE ON ledger_accounts
    FOR EACH STATEMENT EXECUTE FUNCTION ledger_accounts_not_emptied();

CREATE OR REPLACE FUNCTION ledger_ids_kept() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM ledger_refuse(TG_TABLE_NAME || ': a ledger id or a transfer''s account cannot change');
    RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS ledger_account_id_kept ON ledger_accounts;
CREATE TRIGGER ledger_account_id_kept
    BEFORE UPDATE OF id ON ledger_accounts
    FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id) EXECUTE FUNCTION ledger_ids_kept();

DROP TRIGGER IF EXISTS ledger_transfer_accounts_kept ON ledger_transfers;
CREATE TRIGGER ledger_transfer_accounts_kept
    BEFORE UPDATE OF debit_account_id, credit_account_id ON ledger_transfers
    FOR EACH ROW WHEN (OLD.debit_account_id IS DISTINCT FROM NEW.debit_account_id
                       OR OLD.credit_account_id IS DISTINCT FROM NEW.credit_account_id)
    EXECUTE FUNCTION ledger_ids_kept();
