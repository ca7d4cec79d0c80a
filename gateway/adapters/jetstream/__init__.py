"""NATS JetStream: the broker connection and the `WEBHOOKS` stream (`broker`), pipelined
publishing with one PubAck subscription (`publish`), a one-pass command's publisher
(`one_shot`), and the durable pull consumer the settlement worker reads from
(`consumer`)."""
