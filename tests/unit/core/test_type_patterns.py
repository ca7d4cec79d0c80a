"""The one event type pattern language, for `[providers.X] event_types` and `--type`:
which patterns are valid, and which types each matches."""

from __future__ import annotations

import pytest

from gateway.core.type_patterns import (
    MAX_PATTERN_CHARS,
    TypePattern,
    parse_pattern,
    type_allowed,
    type_patterns,
)

# (pattern, event type, matches)
MATCHES = [
    ("charge.refunded", "charge.refunded", True),  # exact
    ("charge.refunded", "charge.refunded.extra", False),  # exact is not a prefix
    ("charge.refunded", "Charge.refunded", False),  # case-sensitive, as providers' types are
    ("payment_intent.*", "payment_intent.succeeded", True),  # prefix
    ("payment_intent.*", "payment_intent.", True),  # `*` may stand for nothing
    ("payment_intent.*", "payment_intent", False),  # the prefix includes the dot
    ("invoice.*", "invoices", False),
    ("invoice*", "invoices", True),
    ("orders/*", "orders/create", True),  # matched as written...
    ("orders/*", "orders.create", False),  # ...not as subject tokens
    ("*", "anything.at.all", True),  # `*` alone matches every type
]


@pytest.mark.parametrize(("pattern", "event_type", "matches"), MATCHES)
def test_which_types_a_pattern_matches(pattern: str, event_type: str, matches: bool) -> None:
    """Exact means exact; a final `*` matches every type starting with the prefix."""
    assert type_allowed(event_type, type_patterns([pattern])) is matches


@pytest.mark.parametrize(
    ("text", "is_prefix", "prefix"),
    [("invoice.paid", False, "invoice.paid"), ("invoice.*", True, "invoice."), ("*", True, "")],
)
def test_a_pattern_is_exact_or_a_prefix(text: str, is_prefix: bool, prefix: str) -> None:
    """What the database query is built from: an exact type, or a prefix to match."""
    pattern = parse_pattern(text)
    assert pattern == TypePattern(text)
    assert (pattern.is_prefix, pattern.prefix) == (is_prefix, prefix)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "must not be empty"),
        ("   ", "must not be empty"),
        (" push", "leading or trailing whitespace"),
        ("push ", "leading or trailing whitespace"),
        ("in*voice", "'*' may only end a pattern"),  # not a glob
        ("a.*.b", "'*' may only end a pattern"),
        ("a**", "'*' may only end a pattern"),
        ("a\x00b", "control characters"),
        ("a\u2028b", "control characters"),
        ("t" * (MAX_PATTERN_CHARS + 1), f"at most {MAX_PATTERN_CHARS} characters"),
    ],
)
def test_a_pattern_that_means_nothing_is_refused_saying_why(text: str, reason: str) -> None:
    """Each refusal says why, for the config key's or the flag's one-line error."""
    with pytest.raises(ValueError, match=reason):
        parse_pattern(text)


def test_a_config_list_is_checked_in_order_and_must_not_be_empty() -> None:
    """An empty allow-list would refuse every event: leaving the key out allows all."""
    assert type_patterns(["b.*", "a"]) == ("b.*", "a")
    with pytest.raises(ValueError, match="at least one pattern"):
        type_patterns([])
    with pytest.raises(ValueError, match="may only end"):
        type_patterns(["ok", "not*ok"])


def test_the_longest_pattern_is_accepted() -> None:
    assert parse_pattern("t" * MAX_PATTERN_CHARS).text == "t" * MAX_PATTERN_CHARS
