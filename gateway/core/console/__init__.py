"""The operator console's decisions: roles and capabilities (`roles`), tokens, sessions and
the login throttle (`access`), the overview's figures (`overview`, `outages`), the audit
trail (`audit_values`, `audit_search`), and where an accepted event's settlement stands
(`event_settlement`)."""
