-- The operator console: tokens and the sessions made from them, an insert-only audit
-- trail, and replays as jobs that `gateway dlq run-jobs` executes. Idempotent: safe to
-- apply again.

-- Only the SHA-256 of a token is kept: a copy of this table lets no one in.
CREATE TABLE IF NOT EXISTS console_tokens (
    id            bigserial   PRIMARY KEY,
    name          text        NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$'),
    role          text        NOT NULL
                  CHECK (role IN ('viewer', 'investigator', 'operator', 'admin')),
    token_sha256  bytea       NOT NULL UNIQUE CHECK (length(token_sha256) = 32),
    created_by    text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz,
    last_used_at  timestamptz,
    revoked_at    timestamptz,
    revoked_by    text
);
-- A name is taken by at most one live token; a revoked name can be issued again.
CREATE UNIQUE INDEX IF NOT EXISTS console_tokens_live_name
    ON console_tokens (name) WHERE revoked_at IS NULL;

-- Server-side sessions: the cookie carries a random id, the table its SHA-256.
CREATE TABLE IF NOT EXISTS console_sessions (
    id_sha256     bytea       PRIMARY KEY CHECK (length(id_sha256) = 32),
    token_id      bigint      REFERENCES console_tokens (id),  -- NULL: an SSO proxy login
    principal     text        NOT NULL,
    role          text        NOT NULL
                  CHECK (role IN ('viewer', 'investigator', 'operator', 'admin')),
    address       text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_seen_at  timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,  -- created_at + the 8 h maximum
    ended_at      timestamptz            -- logout, or the token's revocation
);
CREATE INDEX IF NOT EXISTS console_sessions_token ON console_sessions (token_id);

-- Every state change, login, refusal and payload view. Rows are written in the same
-- transaction as the change they record, and never updated or deleted (a trigger
-- refuses both), so the trail is a record and not a log that can be tidied.
CREATE TABLE IF NOT EXISTS console_audit (
    id        bigserial   PRIMARY KEY,
    at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    actor     text        NOT NULL,  -- console:<name>, or the address of an anonymous request
    role      text,
    via       text        CHECK (via IN ('cookie', 'bearer', 'proxy', 'cli', 'anonymous')),
    address   text,
    action    text        NOT NULL,  -- e.g. login, login.failed, dlq.resolve, payload.view
    target    text,                  -- e.g. dlq:412, job:7, key:stripe/pi_123, token:alice
    outcome   text        NOT NULL CHECK (outcome IN ('ok', 'refused', 'failed')),
    detail    jsonb       NOT NULL DEFAULT '{}'::jsonb
);
CREATE INDEX IF NOT EXISTS console_audit_at ON console_audit (at DESC, id DESC);
CREATE INDEX IF NOT EXISTS console_audit_target ON console_audit (target, id DESC);
CREATE INDEX IF NOT EXISTS console_audit_actor ON console_audit (actor, id DESC);

CREATE OR REPLACE FUNCTION console_audit_insert_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'console_audit is insert-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;
DROP TRIGGER IF EXISTS console_audit_insert_only ON console_audit;
CREATE TRIGGER console_audit_insert_only
    BEFORE UPDATE OR DELETE ON console_audit
    FOR EACH ROW EXECUTE FUNCTION console_audit_insert_only();
DROP TRIGGER IF EXISTS console_audit_no_truncate ON console_audit;
CREATE TRIGGER console_audit_no_truncate
    BEFORE TRUNCATE ON console_audit
    FOR EACH STATEMENT EXECUTE FUNCTION console_audit_insert_only();

-- Replays as rows: planned in the console (or by the API), run by `gateway dlq run-jobs`,
-- surviving a restart of either. The items are the plan's rows in replay order.
CREATE TABLE IF NOT EXISTS replay_jobs (
    id               bigserial   PRIMARY KEY,
    kind             text        NOT NULL CHECK (kind IN ('dlq', 'events')),
    state            text        NOT NULL DEFAULT 'planned'
                     CHECK (state IN ('planned', 'running', 'paused', 'done', 'failed',
                                      'cancelled')),
    created_by       text        NOT NULL,  -- console:<name>
    created_at       timestamptz NOT NULL DEFAULT now(),
    idempotency_key  text,
    request          jsonb       NOT NULL,  -- the filter or ids and the options, as asked
    rate_per_s       double precision CHECK (rate_per_s IS NULL OR rate_per_s > 0),
    max_attempts     integer     NOT NULL DEFAULT 5 CHECK (max_attempts > 0),
    ordered          boolean     NOT NULL DEFAULT true,
    total            integer     NOT NULL DEFAULT 0,
    runner           text,                  -- the run-jobs process holding it
    heartbeat_at     timestamptz,
    started_at       timestamptz,
    finished_at      timestamptz,
    error            text
);
CREATE UNIQUE INDEX IF NOT EXISTS replay_jobs_idempotency
    ON replay_jobs (created_by, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS replay_jobs_live
    ON replay_jobs (id) WHERE state IN ('planned', 'running');

CREATE TABLE IF NOT EXISTS replay_job_items (
    job_id       bigint      NOT NULL REFERENCES replay_jobs (id),
    position     integer     NOT NULL,
    dlq_id       bigint,              -- kind 'dlq'
    webhook_id   bigint,              -- kind 'events': processed_webhooks.id
    state        text        NOT NULL DEFAULT 'pending'
                 CHECK (state IN ('pending', 'replayed', 'failed', 'skipped')),
    error_class  text,
    message      text,
    done_at      timestamptz,
    PRIMARY KEY (job_id, position),
    CHECK ((dlq_id IS NULL) <> (webhook_id IS NULL))
);
CREATE INDEX IF NOT EXISTS replay_job_items_dlq ON replay_job_items (dlq_id)
    WHERE dlq_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS replay_job_items_pending ON replay_job_items (job_id, position)
    WHERE state = 'pending';
