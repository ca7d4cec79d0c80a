"""`gateway serve` and `gateway relay`: the HTTP surface, the idempotency gate with group
commit, repeats answered from memory, and publishing recorded rows to JetStream.

Nothing here imports the settlement or DLQ side: a serving process loads neither.
"""
