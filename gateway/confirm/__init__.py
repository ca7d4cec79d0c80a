"""The confirm stage, `gateway confirm`: fetches what webhooks only name from their
providers' APIs and records the events the answers hold (`worker`), paced per provider
(`pacing`). The decisions are `gateway.core.confirm`'s; the table is
`gateway.adapters.postgres.confirmations`'."""
