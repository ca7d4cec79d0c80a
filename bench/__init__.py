"""`make bench`: the gateway side by side with a bare endpoint (see bench/run.py)."""
