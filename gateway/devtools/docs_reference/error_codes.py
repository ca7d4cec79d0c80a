"""The error-code reference page, generated from `gateway.errors.ErrorClass`: each code's
family and meaning come from the enum, what an operator does about it from
`core.failures.actions.ACTIONS`, so a new code without advice fails to render (and its
test fails)."""

from __future__ import annotations

from gateway.core.failures.actions import ACTIONS
from gateway.devtools.docs_reference.text import code, generated_header, table
from gateway.errors import ErrorClass, Family

__all__ = ["ACTIONS", "render"]


def render() -> str:
    """The page `docs/reference/error-codes.md`."""
    families = table(
        ("Family", "What happens"),
        ((f"**{family.value}**", family.description) for family in Family),
    )
    codes = table(
        ("Code", "Family", "What it means", "What to do"),
        (
            (code(member.value), member.family.value, member.description, ACTIONS[member])
            for member in ErrorClass
        ),
    )
    return (
        generated_header("gateway.errors.ErrorClass")
        + "# Error codes\n\n"
        + "Every failure the gateway records carries one of these codes: in "
        + "`dlq_webhooks.error_class` (and a settlement row's `error_class`), in the "
        + "`error_class` label of `gateway_dlq_total`, in log lines, spans and alert text, "
        + "and in `gateway dlq list --error-class`. A code is never renamed, so dashboards "
        + "and scripts may match on it.\n\n"
        + "## Families\n\n"
        + "The family says what happens to an event, a request or a command that fails "
        + "with the code.\n\n"
        + families
        + "\n## Codes\n\n"
        + codes
    )
