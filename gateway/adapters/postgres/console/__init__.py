"""The console's tables and SQL: tokens and sessions (`access`), the audit trail
(`audit`, `audit_reads`), the event log (`events`), the held-keys list (`keys`) and the
overview's figures (`stats`)."""
