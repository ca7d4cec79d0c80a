"""The metrics facade and its multiprocess mode."""
