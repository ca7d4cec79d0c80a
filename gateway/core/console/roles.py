"""Who may do what in the operator console: four roles, each a set of capabilities that
contains the one below it (viewer < investigator < operator < admin).

Routes ask for a capability, never for a role, so a page's rule reads as what it shows
or changes. Pure.
"""

from __future__ import annotations

import enum
from types import MappingProxyType


class Role(enum.StrEnum):
    VIEWER = "viewer"
    INVESTIGATOR = "investigator"
    OPERATOR = "operator"
    ADMIN = "admin"


class Capability(enum.StrEnum):
    #: Metadata and counts: lists, stats, error classes and messages, no bodies or
    #: header values.
    VIEW = "view"
    #: Payloads, header values (masked where secret), raw downloads and exports that
    #: carry them.
    READ_PAYLOADS = "read_payloads"
    #: Replays, resolves, releasing and skipping held keys, job control.
    OPERATE = "operate"
    #: Tokens and the audit trail's export.
    ADMINISTER = "administer"


_LADDER = (Role.VIEWER, Role.INVESTIGATOR, Role.OPERATOR, Role.ADMIN)
_GRANTS = (Capability.VIEW, Capability.READ_PAYLOADS, Capability.OPERATE, Capability.ADMINISTER)

#: Each role's capabilities: its own grant and every grant below it.
CAPABILITIES: MappingProxyType[Role, frozenset[Capability]] = MappingProxyType(
    {role: frozenset(_GRANTS[: i + 1]) for i, role in enumerate(_LADDER)}
)


def can(role: Role, capability: Capability) -> bool:
    return capability in CAPABILITIES[role]


def least_role(capability: Capability) -> Role:
    """The lowest role that holds `capability` (what a 403 tells the user to ask for)."""
    return next(role for role in _LADDER if can(role, capability))
