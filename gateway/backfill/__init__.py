"""`gateway backfill PROVIDER`: events the provider's API has and the gateway never
recorded, recovered through the same idempotency gate as a webhook (`run`), shaped as
the webhook would have been (`shape`)."""
