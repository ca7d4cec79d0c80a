"""The operator side of dead letters: replay (a static stage -> handler table) and its
handlers, the CLI's formatting, and the DLQ alerts."""
