"""Replays as operators ask for them (`requests`) and as jobs that `gateway dlq run-jobs`
executes (`jobs`)."""
