"""NATS JetStream: the broker connection and the `WEBHOOKS` stream (`broker`, `stream`),
publishing in atomic batches (`atomic`, its frames in `wire`) or one message at a time,
pipelined (`publish`), both over one reply subscription (`replies`); a one-pass
command's publisher (`one_shot`), and the durable pull consumer the settlement worker
reads from (`consumer`)."""
