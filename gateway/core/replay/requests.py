"""A replay as an operator asks for it, in the console's planner form or its API body:
which rows (a filter, as the DLQ list's or the event log's query string, or ids) and
how (limit, rate, max attempts, order, force). Read the same way from either, so a form
and an API call asking the same thing plan the same replay.

Pure. Every problem is a `UsageError` whose message names the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway.core.dlq.filters import FILTER_KEYS
from gateway.core.operator_input import parse_ids
from gateway.core.replay.jobs import JobKind
from gateway.errors import UsageError

#: The most rows one job replays: a wider replay is narrowed, or given a limit.
JOB_MAX_ROWS = 100_000
#: The event log's filter keys (`core.events.search`), which the planner reads for events.
EVENT_KEYS = frozenset({"provider", "type", "since", "until", "event_id", "source"})


def unflag(message: str) -> str:
    """The shared parsers speak of `--limit`; a form has a field named `limit`."""
    return (
        message.replace("--id and --all exclude each other; give one", "give ids or a filter")
        .replace("--event-id", "event_id")
        .replace("--max-attempts", "max_attempts")
        .replace("--", "")
    )


def _shown(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)


def _number(text: str | None, name: str, low: float, high: float, *, whole: bool) -> float | None:
    if text is None or not str(text).strip():
        return None
    try:
        value = int(str(text).strip()) if whole else float(str(text).strip())
    except ValueError:
        value = math.nan
    if not (low <= value <= high):
        kind = "a whole number" if whole else "a number"
        raise UsageError(
            f"{name}: must be {kind} from {_shown(low)} to {_shown(high)}, got {text!r}"
        )
    return value


@dataclass(frozen=True)
class PlanAsk:
    """What was asked: which rows (a filter as query parameters, or ids) and how."""

    kind: JobKind = JobKind.DLQ
    params: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # the filter only
    ids: tuple[int, ...] = ()
    limit: int | None = None
    rate_per_s: float | None = None
    max_attempts: int = 5
    ordered: bool = True
    force: bool = False

    def request_doc(self) -> dict[str, Any]:
        """As stored in `replay_jobs.request`."""
        doc: dict[str, Any] = {"kind": self.kind.value}
        if self.ids:
            doc["ids"] = list(self.ids)
        else:
            doc["filter"] = {k: list(v) for k, v in self.params.items()}
        doc.update(
            limit=self.limit,
            rate=self.rate_per_s,
            max_attempts=self.max_attempts,
            ordered=self.ordered,
            force=self.force,
        )
        return doc

    def hidden_fields(self) -> list[tuple[str, str]]:
        """The choice of rows as form fields, carried from the plan to its start."""
        pairs = [("kind", self.kind.value)]
        if self.ids:
            return pairs + [("id", str(i)) for i in self.ids]
        return pairs + [(k, v) for k, values in self.params.items() for v in values]


def ask_from_params(params: Mapping[str, Sequence[str]]) -> PlanAsk:
    """The planner's query string or form: `kind`, the filter (the DLQ list's keys, or
    the event log's), `id` or `ids` (repeatable, or separated by commas), `limit`, `rate`,
    `max_attempts`, `order` (key | arrival), `force`."""

    def one(name: str) -> str | None:
        values = [v for v in params.get(name, ()) if v.strip()]
        return values[-1].strip() if values else None

    kind_text = one("kind") or "dlq"
    if kind_text not in {k.value for k in JobKind}:
        raise UsageError(f"kind: {kind_text!r} is not one of dlq, events")
    kind = JobKind(kind_text)
    keys = FILTER_KEYS if kind is JobKind.DLQ else EVENT_KEYS | {"state", "contains"}
    filters = {k: tuple(v for v in vs if v.strip()) for k, vs in params.items() if k in keys}
    # `ids` is read as `id` too: a link may name the rows either way.
    given = [*params.get("id", ()), *params.get("ids", ())]
    ids_text = [p for v in given for p in v.replace(",", " ").split()]
    try:
        ids = parse_ids(ids_text, "id")
    except UsageError as exc:
        raise UsageError(str(exc)) from None
    order = one("order") or "key"
    if order not in ("key", "arrival"):
        raise UsageError(f"order: {order!r} is not one of key, arrival")
    limit = _number(one("limit"), "limit", 1, JOB_MAX_ROWS, whole=True)
    rate = _number(one("rate"), "rate", 0.001, 1_000_000, whole=False)
    attempts = _number(one("max_attempts"), "max_attempts", 1, 1_000_000, whole=True)
    return PlanAsk(
        kind=kind,
        params={k: v for k, v in filters.items() if v},
        ids=ids,
        limit=None if limit is None else int(limit),
        rate_per_s=rate,
        max_attempts=5 if attempts is None else int(attempts),
        ordered=order == "key",
        force=(one("force") or "").lower() in ("1", "true", "on", "yes"),
    )


def ask_from_json(body: Mapping[str, Any]) -> PlanAsk:
    """The API's `{kind, ids | filter, rate, limit, ordered, max_attempts, force}`, read
    as the form is (the filter's keys are the query string's)."""
    params: dict[str, list[str]] = {}
    raw_filter = body.get("filter") or {}
    if not isinstance(raw_filter, Mapping):
        raise UsageError(
            'filter: give an object of query parameters, e.g. {"stage": ["settlement"]}'
        )
    for key, value in raw_filter.items():
        values = value if isinstance(value, list) else [value]
        if not all(isinstance(v, str | int) and not isinstance(v, bool) for v in values):
            raise UsageError(f"filter.{key}: give a string or a list of strings")
        params[str(key)] = [str(v) for v in values]
    ids = body.get("ids") or []
    if not isinstance(ids, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in ids
    ):
        raise UsageError("ids: give a list of row ids (whole numbers)")
    if ids and (raw_filter or body.get("limit") is not None):
        raise UsageError("a filter and limit choose rows instead of ids: give ids, or a filter")
    ordered = body.get("ordered", True)
    force = body.get("force", False)
    if not isinstance(ordered, bool) or not isinstance(force, bool):
        raise UsageError("ordered and force are true or false")
    for name in ("limit", "rate", "max_attempts"):
        value = body.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise UsageError(f"{name}: give a number or null")
    kind = body.get("kind", "dlq")
    if not isinstance(kind, str):
        raise UsageError("kind: dlq or events")

    def text(name: str) -> list[str]:
        value = body.get(name)
        return [] if value is None else [str(value)]

    return ask_from_params(
        {
            **params,
            "kind": [kind],
            "id": [str(i) for i in ids],
            "limit": text("limit"),
            "rate": text("rate"),
            "max_attempts": text("max_attempts"),
            "order": ["key" if ordered else "arrival"],
            "force": ["true" if force else ""],
        }
    )
