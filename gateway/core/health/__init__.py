"""Whether the gateway can work and keep its word: the dependencies a payment waits on
(`dependencies`), what `/readyz` answers (`readiness`), when a worker steps aside from a
silent database (`step_aside`), whether a failover can lose an acknowledged event
(`durability`), and the in-process alerts (`alerting`)."""
