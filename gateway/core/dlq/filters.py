"""What an operator asked the DLQ commands for: which rows, and how a replay runs.

The times and ids inside are read by `core.operator_input`, as every command reads them.
Pure: `now` is passed in. Every problem is a `DlqUsageError` whose message is the one
line the operator sees.

`gateway dlq list` and the console read the same grammar with the same code: the CLI
passes its flags to `build_filter`, the console its query string through
`filter_from_query`, which calls `build_filter`; `filter_query` writes a filter back as
the query string that reads as it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from gateway.core.bodies.content import has_control_chars
from gateway.core.events.model import FORWARD_STAGE_PREFIX, Stage, is_destination_name
from gateway.core.instants import instant
from gateway.core.operator_input import parse_ids, parse_instant
from gateway.core.type_patterns import TypePattern, parse_pattern
from gateway.errors import DlqUsageError, UsageError

#: `--search`: longer text is refused (an event id or a phrase of a message is short,
#: and the search is a substring scan over the rows the other filters leave).
MAX_SEARCH_CHARS = 200
#: `--min-attempts`: a row's attempts are counted one per delivery, replay or retry.
MAX_MIN_ATTEMPTS = 1_000_000


def _is_forward_stage(stage: str) -> bool:
    """The dead-letter stage of a forwarding destination: `forward:` and its name."""
    name = stage.removeprefix(FORWARD_STAGE_PREFIX)
    return name != stage and is_destination_name(name)


@dataclass(frozen=True)
class DlqFilter:
    """Which dead-letter rows a command applies to (empty tuples mean any)."""

    stages: tuple[str, ...] = ()
    error_classes: tuple[str, ...] = ()
    providers: tuple[str, ...] = ()
    since: datetime | None = None  # first failure at or after
    until: datetime | None = None  # first failure before
    resolved: bool | None = False  # None: both
    #: The event's type (from its `processed_webhooks` row): exact or a prefix `a.*`.
    types: tuple[TypePattern, ...] = ()
    #: A literal, case-insensitive substring of the event id or the error message.
    search: str | None = None
    min_attempts: int | None = None  # attempts at least
    #: False: `search` matches the event id, and only the messages every role may read
    #: (`core.payload_text`): a console role that may not read a message must not learn
    #: what it says by searching for it.
    search_messages: bool = True

    @property
    def narrowed(self) -> bool:
        """True if any filter beyond the default resolved/unresolved choice was given."""
        return bool(
            self.stages
            or self.error_classes
            or self.providers
            or self.since
            or self.until
            or self.types
            or self.search
            or self.min_attempts
        )


def _parse_type(text: str) -> TypePattern:
    try:
        return parse_pattern(text.strip())
    except ValueError as exc:
        raise DlqUsageError(
            f"--type: {exc}; give a type exactly (invoice.paid) or a prefix ending in * (invoice.*)"
        ) from None


def _parse_search(text: str | None) -> str | None:
    value = (text or "").strip()
    if not value:
        return None
    if len(value) > MAX_SEARCH_CHARS:
        raise DlqUsageError(f"--search: at most {MAX_SEARCH_CHARS} characters")
    if has_control_chars(value):
        raise DlqUsageError("--search: must not hold control characters")
    return value


def _names(flag: str, values: Sequence[str]) -> list[str]:
    """Provider names and error classes as typed: no control characters (PostgreSQL
    refuses a NUL in text, and no stored name holds one), at most MAX_SEARCH_CHARS."""
    for value in values:
        if has_control_chars(value) or len(value) > MAX_SEARCH_CHARS:
            shown = value[:24].encode("unicode_escape").decode()
            raise DlqUsageError(
                f"{flag}: {shown!r} is not a name"
                f" (printable, at most {MAX_SEARCH_CHARS} characters)"
            )
    return list(values)


def _parse_min_attempts(text: str | int | None) -> int | None:
    if text is None or (isinstance(text, str) and not text.strip()):
        return None
    value = str(text).strip()
    if not (
        len(value) <= 9
        and value.isascii()
        and value.isdigit()
        and 1 <= int(value) <= MAX_MIN_ATTEMPTS
    ):
        shown = value if len(value) <= 24 else value[:24] + "..."
        raise DlqUsageError(
            f"--min-attempts: {shown!r} is not a whole number from 1 to {MAX_MIN_ATTEMPTS:,}"
        )
    return int(value)


def build_filter(
    now: datetime,
    *,
    stages: Sequence[str] = (),
    error_classes: Sequence[str] = (),
    providers: Sequence[str] = (),
    since: str | None = None,
    until: str | None = None,
    resolved: bool = False,
    unresolved: bool = False,
    include_all: bool = False,
    types: Sequence[str] = (),
    search: str | None = None,
    min_attempts: str | int | None = None,
) -> DlqFilter:
    """Check the filter flags together and turn them into a `DlqFilter`."""
    known = [s.value for s in Stage]
    for stage in stages:
        if stage not in known and not _is_forward_stage(stage):
            raise DlqUsageError(
                f"--stage: unknown stage {stage!r} (one of {', '.join(known)}, or forward:NAME)"
            )
    if sum((resolved, unresolved, include_all)) > 1:
        raise DlqUsageError("--resolved, --unresolved and --any exclude each other; give one")
    try:
        start = parse_instant(since, now, "--since") if since else None
        end = parse_instant(until, now, "--until") if until else None
    except UsageError as exc:  # the shared syntax, reported as this command's mistake
        raise DlqUsageError(str(exc)) from None
    if start is not None and end is not None and start >= end:
        raise DlqUsageError("--since must be earlier than --until")
    return DlqFilter(
        stages=tuple(dict.fromkeys(stages)),
        # Error classes are upper-case names; accept what an operator types at 3 a.m.
        error_classes=tuple(
            dict.fromkeys(c.upper() for c in _names("--error-class", error_classes))
        ),
        providers=tuple(dict.fromkeys(_names("--provider", providers))),
        since=start,
        until=end,
        resolved=None if include_all else resolved,
        types=tuple(dict.fromkeys(_parse_type(t) for t in types)),
        search=_parse_search(search),
        min_attempts=_parse_min_attempts(min_attempts),
    )


# The console's query string: one key per CLI flag (`error_class` for `--error-class`),
# and `state` for the choice of `--unresolved` (open, the default), `--resolved`, `--any`.
_LISTS = {
    "stage": "stages",
    "error_class": "error_classes",
    "provider": "providers",
    "type": "types",
}
_SINGLE = ("since", "until", "search", "min_attempts", "state")
_STATES = {"open": (False, False), "resolved": (True, False), "any": (False, True)}
#: The query-string keys a filter is read from; others (a cursor, a limit) are the page's.
FILTER_KEYS = frozenset(_LISTS) | frozenset(_SINGLE)


def filter_from_query(now: datetime, params: Mapping[str, Sequence[str]]) -> DlqFilter:
    """A query string's filter (each key with its list of values, as parsed from the
    URL), read by `build_filter`. Empty values are absent fields of a GET form; a
    single-valued key given twice is refused rather than one of them picked."""
    lists: dict[str, list[str]] = {name: [] for name in _LISTS.values()}
    single: dict[str, str | None] = dict.fromkeys(_SINGLE)
    for key, values in params.items():
        given = [v for v in values if v.strip()]
        if key in _LISTS:
            lists[_LISTS[key]] += given
        elif key in single and given:
            if len(given) > 1:
                raise DlqUsageError(f"{key}: give it once, not {len(given)} times")
            single[key] = given[0]
    state = (single["state"] or "open").strip().lower()
    if state not in _STATES:
        raise DlqUsageError(f"state: {state!r} is not one of {', '.join(_STATES)}")
    resolved, include_all = _STATES[state]
    return build_filter(
        now,
        stages=[s.strip().lower() for s in lists["stages"]],
        error_classes=[c.strip() for c in lists["error_classes"]],
        providers=[p.strip() for p in lists["providers"]],
        types=lists["types"],
        since=single["since"],
        until=single["until"],
        search=single["search"],
        min_attempts=single["min_attempts"],
        resolved=resolved,
        unresolved=not (resolved or include_all),
        include_all=include_all,
    )


def filter_query(f: DlqFilter) -> list[tuple[str, str]]:
    """The query string `filter_from_query` reads back as `f` (times absolute, so a
    link or a bulk form means the same rows later as when the page was drawn)."""
    pairs = [("state", {False: "open", True: "resolved", None: "any"}[f.resolved])]
    pairs += [("stage", s) for s in f.stages] + [("provider", p) for p in f.providers]
    pairs += [("error_class", c) for c in f.error_classes]
    pairs += [("type", t.text) for t in f.types]
    if f.since is not None:
        pairs.append(("since", instant(f.since)))
    if f.until is not None:
        pairs.append(("until", instant(f.until)))
    if f.search is not None:
        pairs.append(("search", f.search))
    if f.min_attempts is not None:
        pairs.append(("min_attempts", str(f.min_attempts)))
    return pairs


@dataclass(frozen=True)
class ReplayOptions:
    """How a replay runs: which rows, how fast, and what counts as given up."""

    ids: tuple[int, ...] = ()
    limit: int | None = None
    rate_per_s: float | None = None
    max_attempts: int = 5
    force: bool = False
    dry_run: bool = False
    #: Replay in arrival order (received_at, id) instead of each key's rows in key_seq
    #: order. Off by default: a key's events settle only in their order.
    unordered: bool = False


def check_replay_flags(
    *,
    ids: Sequence[str],
    replay_all: bool,
    dlq_filter: DlqFilter,
    limit: int | None,
    rate_per_s: float | None,
    max_attempts: int,
    force: bool,
    dry_run: bool,
    unordered: bool = False,
) -> ReplayOptions:
    """Refuse contradictory or meaningless replay flags; return the options to run."""
    if ids and replay_all:
        raise DlqUsageError("--id and --all exclude each other; give one")
    if not ids and not replay_all:
        raise DlqUsageError("say which rows: --id ID (repeatable) or --all with filters")
    if ids and (dlq_filter.narrowed or limit is not None):
        raise DlqUsageError("filters and --limit apply to --all, not to --id")
    if limit is not None and limit <= 0:
        raise DlqUsageError(f"--limit must be a positive number, got {limit}")
    if rate_per_s is not None and not (rate_per_s > 0 and math.isfinite(rate_per_s)):
        raise DlqUsageError(
            f"--rate must be a positive number of rows per second, got {rate_per_s}"
        )
    if max_attempts <= 0:
        raise DlqUsageError(f"--max-attempts must be a positive number, got {max_attempts}")
    try:
        row_ids = parse_ids(ids)
    except UsageError as exc:
        raise DlqUsageError(str(exc)) from None
    return ReplayOptions(
        ids=row_ids,
        limit=limit,
        rate_per_s=rate_per_s,
        max_attempts=max_attempts,
        force=force,
        dry_run=dry_run,
        unordered=unordered,
    )
