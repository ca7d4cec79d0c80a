"""The hint for a mistyped flag: `--provdier` is answered "did you mean --provider?",
from the flags the command itself accepts (difflib's closeness, as Python 3.14's
argparse suggests choices). Pure."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence

#: How alike a typo and a flag must be (difflib's ratio) to be suggested: one swapped
#: or missing letter in a flag of six or more passes, an unrelated flag does not.
CUTOFF = 0.75


def typo_hint(args: Sequence[str], known: Iterable[str]) -> str | None:
    """The error for the first long flag among `args` (before a `--`) that is not one
    of `known` nor a prefix argparse would take for one, when it is close to one of
    them (`--flag=value` is read as `--flag`); None when there is none."""
    flags = [k for k in known if k.startswith("--")]
    for arg in args:
        if arg == "--":
            return None  # what follows is positional, whatever it looks like
        if not arg.startswith("--"):
            continue
        name = arg.split("=", 1)[0]
        if name in flags or any(f.startswith(name) for f in flags):
            continue
        found = difflib.get_close_matches(name, flags, n=1, cutoff=CUTOFF)
        if found:
            return f"unrecognized argument {name}: did you mean {found[0]}?"
    return None
