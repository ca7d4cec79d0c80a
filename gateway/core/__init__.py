"""Pure decisions: no I/O, time and randomness passed in."""
