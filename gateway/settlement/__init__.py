"""`gateway settle`, `gateway reconcile` and `gateway ledger`: the JetStream consumer, one
event and a batch settled idempotently, reconciliation, and the ledger commands."""
