-- A settlement's move from pending to settled rewrites its row in place (a HOT update)
-- instead of adding index entries for the new version. Idempotent: safe to apply again.
--
-- Every settlement row is inserted pending and updated to settled once its transfer is
-- posted. PostgreSQL can keep such an update on the same page, with no new index
-- entries, only when no index names a column the update changes (a partial index's
-- condition counts) and the page has room. `settlements_open_idx` named both
-- `updated_at` and `state`, so every update wrote a new entry in each of the table's
-- four indexes; that was the largest part of the database's work per settled event
-- after the ledger itself (measured: about 15 to 20 microseconds of PostgreSQL CPU per
-- event). No query of the gateway used it: settlements are read by transfer id and by
-- payment id. The fill factor leaves room on each page for the settled version of every
-- row it holds (new pages only; existing rows keep their pages).

DROP INDEX IF EXISTS settlements_open_idx;

ALTER TABLE settlements SET (fillfactor = 50);
