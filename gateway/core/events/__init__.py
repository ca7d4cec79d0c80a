"""The event: as the gateway records it (`model`, its id `ids`, the usual webhook shaped in
one pass `shaper`), and as `gateway events` and the console's event log find it (`filters`,
`search`, `rows`)."""
