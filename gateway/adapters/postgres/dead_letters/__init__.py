"""The SQL of `dlq_webhooks`: the DLQ commands' reads and writes (`rows`), the console's
pages (`pages`) and their bodies (`bodies`), and the automatic re-drive (`auto_replays`)."""
