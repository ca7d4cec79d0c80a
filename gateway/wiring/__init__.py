"""The composition root, one module per process: every pool, broker, ledger, Redis and
HTTP client is opened and closed here, in one order, and nowhere else.

- `wiring.ingest`: `gateway serve` and `gateway relay`;
- `wiring.settlement`: `gateway settle`, `gateway reconcile`, and the parts that replay
  settlement rows from the DLQ;
- `wiring.ops`: the operator commands (`dlq`, `ledger`);
- `wiring.signals`: running a long-lived process until SIGINT/SIGTERM.
"""
