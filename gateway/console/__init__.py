"""`gateway console`: the operator console, server-rendered HTML and the JSON admin API
from one Starlette app. It imports neither ingest nor settlement: replays it plans are
written as jobs that `gateway dlq run-jobs` executes."""
