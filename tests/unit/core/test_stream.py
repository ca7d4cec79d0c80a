"""The stream the gateway relies on, and how a stream found on the server differs."""

from __future__ import annotations

import pytest

from gateway.core.relay.stream import (
    STREAM_SUBJECTS,
    StreamShape,
    differences,
    upgrades,
    wanted_shape,
)

WANTED = wanted_shape(duplicate_window_s=120, replicas=1, batches=True)


def found(**changes: object) -> StreamShape:
    fields = {
        "subjects": STREAM_SUBJECTS,
        "retention": "limits",
        "storage": "file",
        "duplicate_window_s": 120.0,
        "replicas": 1,
        **changes,
    }
    return StreamShape(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("stream", "expected"),
    [
        # The same stream, subjects in another order, the window to the nanosecond.
        (found(), []),
        (found(subjects=("events.>", "webhooks.>")), []),
        (found(duplicate_window_s=120.0000001), []),
        # A stream without atomic batches is no mismatch: the relay does without them.
        (found(allow_atomic=False), []),
        # Each field the gateway relies on, named with both values.
        (
            found(subjects=("webhooks.>",)),
            ["subjects webhooks.> (configured events.>, webhooks.>)"],
        ),
        (found(subjects=()), ["subjects none (configured events.>, webhooks.>)"]),
        (found(retention="workqueue"), ["retention workqueue (configured limits)"]),
        (found(storage="memory"), ["storage memory (configured file)"]),
        (found(duplicate_window_s=60.0), ["duplicate window 60 s (configured 120 s)"]),
        (found(replicas=3), ["replicas 3 (configured 1)"]),
        # Several at once, in a fixed order.
        (
            found(replicas=3, storage="memory", subjects=("x.>",)),
            [
                "subjects x.> (configured events.>, webhooks.>)",
                "storage memory (configured file)",
                "replicas 3 (configured 1)",
            ],
        ),
    ],
)
def test_differences_name_each_field_with_both_values(
    stream: StreamShape, expected: list[str]
) -> None:
    assert [str(d) for d in differences(stream, WANTED)] == expected


def test_a_change_reads_from_the_found_value_to_the_configured_one() -> None:
    (window,) = differences(found(duplicate_window_s=60.0), WANTED)
    assert window.change == "duplicate window 60 s -> 120 s"


@pytest.mark.parametrize(
    ("stream", "wanted", "expected"),
    [
        # `gateway migrate` adds allow_atomic where the server takes atomic batches...
        (found(allow_atomic=False), WANTED, ["allow_atomic false -> true"]),
        (found(allow_atomic=True), WANTED, []),
        # ...not on a server that does not (older than 2.12), and never takes it away.
        (found(allow_atomic=False), wanted_shape(120, 1, batches=False), []),
        (found(allow_atomic=True), wanted_shape(120, 1, batches=False), []),
    ],
)
def test_migrate_adds_allow_atomic_only_where_the_server_takes_batches(
    stream: StreamShape, wanted: StreamShape, expected: list[str]
) -> None:
    assert [d.change for d in upgrades(stream, wanted)] == expected
