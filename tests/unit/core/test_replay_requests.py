"""The planner's reading of a form or an API body: the same choices either way, and a
mistake is one line saying which field."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core.replay.jobs import JobKind
from gateway.core.replay.requests import PlanAsk, ask_from_json, ask_from_params
from gateway.errors import UsageError

# (form fields, what was asked)
FORMS: list[tuple[dict[str, list[str]], PlanAsk]] = [
    ({}, PlanAsk()),
    (
        {"stage": ["settlement"], "error_class": ["unknown_merchant", ""], "cursor": ["x"]},
        PlanAsk(params={"stage": ("settlement",), "error_class": ("unknown_merchant",)}),
    ),
    ({"id": ["12, 13 12"]}, PlanAsk(ids=(12, 13))),  # separated by commas or spaces, once each
    ({"ids": ["14"], "id": ["12"]}, PlanAsk(ids=(12, 14))),
    (
        {"rate": ["2.5"], "limit": ["10"], "max_attempts": ["9"], "order": ["arrival"]},
        PlanAsk(rate_per_s=2.5, limit=10, max_attempts=9, ordered=False),
    ),
    ({"force": ["on"]}, PlanAsk(force=True)),
    (
        {"kind": ["events"], "provider": ["stripe"], "since": ["2h"], "stage": ["ingest"]},
        PlanAsk(kind=JobKind.EVENTS, params={"provider": ("stripe",), "since": ("2h",)}),
    ),
]


@pytest.mark.parametrize(("form", "expected"), FORMS)
def test_a_form_is_read_as_asked(form: dict[str, list[str]], expected: PlanAsk) -> None:
    assert ask_from_params(form) == expected


# (form fields, the start of the message)
BAD_FORMS = [
    ({"kind": ["ledger"]}, "kind: 'ledger' is not one of dlq, events"),
    ({"id": ["12", "x"]}, "id: 'x' is not a row id"),
    ({"rate": ["0"]}, "rate: must be a number from 0.001"),
    ({"rate": ["nan"]}, "rate: must be a number"),
    ({"limit": ["1.5"]}, "limit: must be a whole number"),
    ({"max_attempts": ["0"]}, "max_attempts: must be a whole number from 1"),
    ({"order": ["random"]}, "order: 'random' is not one of key, arrival"),
]


@pytest.mark.parametrize(("form", "message"), BAD_FORMS)
def test_a_bad_form_field_is_named(form: dict[str, list[str]], message: str) -> None:
    with pytest.raises(UsageError) as caught:
        ask_from_params(form)
    assert str(caught.value).startswith(message)


# (API body, what was asked): the same reading as the form's.
BODIES: list[tuple[dict[str, Any], PlanAsk]] = [
    ({}, PlanAsk()),
    ({"kind": "dlq", "ids": [3, 1]}, PlanAsk(ids=(3, 1))),
    (
        {"filter": {"stage": "settlement", "provider": ["stripe", "adyen"]}, "limit": 5},
        PlanAsk(params={"stage": ("settlement",), "provider": ("stripe", "adyen")}, limit=5),
    ),
    (
        {"ordered": False, "rate": 3, "max_attempts": 2},
        PlanAsk(ordered=False, rate_per_s=3.0, max_attempts=2),
    ),
    (
        {"kind": "events", "ids": [7], "force": True},
        PlanAsk(kind=JobKind.EVENTS, ids=(7,), force=True),
    ),
]


@pytest.mark.parametrize(("body", "expected"), BODIES)
def test_an_api_body_is_read_as_the_form_is(body: dict[str, Any], expected: PlanAsk) -> None:
    assert ask_from_json(body) == expected


BAD_BODIES = [
    ({"ids": "1"}, "ids: give a list"),
    ({"ids": [True]}, "ids: give a list"),
    ({"ids": [1], "filter": {"stage": "ingest"}}, "a filter and limit choose rows"),
    ({"ids": [1], "limit": 3}, "a filter and limit choose rows"),
    ({"filter": ["stage"]}, "filter: give an object"),
    ({"filter": {"stage": {"x": 1}}}, "filter.stage: give a string"),
    ({"ordered": "yes"}, "ordered and force are true or false"),
    ({"rate": "fast"}, "rate: give a number or null"),
    ({"kind": 3}, "kind: dlq or events"),
]


@pytest.mark.parametrize(("body", "message"), BAD_BODIES)
def test_a_bad_api_body_is_named(body: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError) as caught:
        ask_from_json(body)
    assert str(caught.value).startswith(message)


def test_the_choice_of_rows_is_carried_as_form_fields() -> None:
    by_filter = PlanAsk(params={"stage": ("settlement", "ingest")})
    assert by_filter.hidden_fields() == [
        ("kind", "dlq"),
        ("stage", "settlement"),
        ("stage", "ingest"),
    ]
    assert (
        ask_from_params(
            {k: [v for f, v in by_filter.hidden_fields() if f == k] for k in ("kind", "stage")}
        )
        == by_filter
    )
    by_ids = PlanAsk(kind=JobKind.EVENTS, ids=(4, 5), params={"provider": ("x",)})
    assert by_ids.hidden_fields() == [("kind", "events"), ("id", "4"), ("id", "5")]
