"""What a failure is and what follows it: transient or permanent (`classify`), retry or
dead-letter (`disposition`, `retry`), the message kept bounded (`excerpt`), and what an
operator does about each error code (`actions`, `runbook`)."""
