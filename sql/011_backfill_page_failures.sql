-- Backfill pages that keep failing (`gateway backfill`, scheduled passes). Idempotent:
-- safe to apply again.
--
-- A run whose next page fails (the API refuses it, answers something that is not its
-- listing, more than api_max_answer_bytes, ...) counts the failed pass on its progress
-- row; a page that succeeds resets the count. After `api_page_attempts` failed passes in
-- a row the row is skipped: no later pass continues it (the rest of its window is not
-- read), the skip is logged and counted (`gateway_backfill_pages_skipped_total`), and
-- the passes go on with newer windows instead of failing on the same page for ever.
ALTER TABLE backfill_progress ADD COLUMN IF NOT EXISTS failed_passes integer NOT NULL DEFAULT 0;
ALTER TABLE backfill_progress ADD COLUMN IF NOT EXISTS last_error text;
ALTER TABLE backfill_progress ADD COLUMN IF NOT EXISTS skipped_at timestamptz;
