"""The outbox relay, decided: where the cursor goes after a batch (`cursor`), the atomic
batches handed to JetStream (`batches`), and the stream as the gateway needs it (`stream`)."""
