"""NATS JetStream: the broker connection and the `WEBHOOKS` stream (`broker`), pipelined
publishing with one PubAck subscription (`publish`), and the durable pull consumer the
settlement worker reads from (`consumer`)."""
