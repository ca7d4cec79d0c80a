"""The stored error codes are one vocabulary: `ErrorClass` holds every code the gateway
stores, every exception carries a member of it, the SQL and the alert rules name only
members, and no member is left that nothing can produce."""

from __future__ import annotations

import ast
import re
import traceback
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway import errors
from gateway.core.failures.disposition import dispose, failure_of
from gateway.devtools.docs_reference import error_codes
from gateway.dlq import replay
from gateway.errors import ErrorClass, Family, GatewayError

ROOT = Path(__file__).resolve().parents[2]
CODES_MODULE = ROOT / "gateway" / "errors" / "codes.py"

#: Which family the codes under each root of the tree belong to.
ROOT_FAMILIES: dict[type[GatewayError], Family] = {
    errors.PermanentError: Family.PERMANENT,
    errors.TransientError: Family.TRANSIENT,
    errors.RequestRejected: Family.REJECTED,
    errors.UsageError: Family.OPERATOR,
    errors.RowNotFound: Family.OPERATOR,
    errors.ConfigError: Family.FATAL,
}


def exception_classes() -> list[type[GatewayError]]:
    """Every class of the tree, the roots included."""
    found, todo = [], [GatewayError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return [c for c in found if c.__module__.startswith("gateway.errors")]


def raise_and_catch(exc: BaseException) -> BaseException:
    """`exc` with a traceback, as the worker and replay see it."""
    try:
        raise exc
    except BaseException as caught:
        return caught


def test_members_are_named_by_their_code_and_described_in_one_line() -> None:
    """`--error-class X` and `ErrorClass.X` read the same; the docs table has a line each."""
    for member in ErrorClass:
        assert member.name == member.value
        assert member.description and "\n" not in member.description, member
        assert member.family in Family
    assert all(f.description for f in Family)


@pytest.mark.parametrize("cls", exception_classes(), ids=lambda c: c.__name__)
def test_every_exception_carries_a_member(cls: type[GatewayError]) -> None:
    """A class attribute that is a plain string would be a code outside the vocabulary."""
    assert isinstance(cls.error_class, ErrorClass), cls


@pytest.mark.parametrize("cls", exception_classes(), ids=lambda c: c.__name__)
def test_a_class_code_belongs_to_the_family_of_its_root(cls: type[GatewayError]) -> None:
    """A permanent error's code says "permanent" in the docs, and so on for each root;
    a code documented as permanent or transient is classified so (by its root)."""
    if "error_class" not in vars(cls):
        return  # inherited, or set per instance (the wrappers carry their cause's)
    for root, family in ROOT_FAMILIES.items():
        if issubclass(cls, root):
            assert cls.error_class.family is family, (cls, cls.error_class.family)
    for family in (Family.PERMANENT, Family.TRANSIENT):
        if cls.error_class.family is family:
            roots = [r for r, f in ROOT_FAMILIES.items() if f is family]
            assert issubclass(cls, tuple(roots)), (cls, family)


def _check_clauses(sql: str) -> Iterator[str]:
    """The body of every `CHECK (...)`, parentheses balanced."""
    for match in re.finditer(r"\bCHECK\s*\(", sql, re.IGNORECASE):
        depth, start = 1, match.end()
        for i in range(start, len(sql)):
            depth += {"(": 1, ")": -1}.get(sql[i], 0)
            if depth == 0:
                yield sql[start:i]
                break


def test_codes_in_sql_checks_are_members() -> None:
    """A CHECK on `error_class` may only allow codes the gateway knows (none exists today;
    this keeps a future one honest)."""
    for path in sorted((ROOT / "sql").glob("*.sql")):
        for clause in _check_clauses(path.read_text()):
            if "error_class" in clause:
                for code in re.findall(r"'([^']*)'", clause):
                    assert code in ErrorClass.__members__, (path.name, code)


def test_codes_in_alert_rules_are_members() -> None:
    """Alert rules, their tests and the alerting core match `error_class` on members."""
    sources = [*sorted((ROOT / "deploy").glob("prometheus*/**/*.yml"))]
    sources.append(ROOT / "gateway" / "core" / "health" / "alerting.py")
    seen = []
    for path in sources:
        text = path.read_text()
        for matcher in re.findall(r'error_class\s*(?:=~|!~|!=|=)\s*"([^"]*)"', text):
            for code in matcher.split("|"):
                assert code in ErrorClass.__members__, (path.name, code)
                seen.append(code)
    assert seen, "no error_class matcher found: the scan is looking in the wrong place"


def _code_literals(path: Path) -> Iterator[tuple[int, str]]:
    """String constants in `path` that spell a code (docstrings are prose)."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
            and node.value in ErrorClass.__members__
        ):
            yield node.lineno, node.value


def test_no_code_is_spelled_as_a_bare_string_in_the_gateway() -> None:
    """Codes are written `ErrorClass.X`, so a rename or a typo cannot slip past mypy."""
    bare = [
        f"{path.relative_to(ROOT)}:{line}: {code!r}"
        for path in sorted((ROOT / "gateway").rglob("*.py"))
        if path != CODES_MODULE
        for line, code in _code_literals(path)
    ]
    assert bare == []


def test_every_member_is_produced_somewhere() -> None:
    """A member nothing stores is a dead code: the class of the tree that carries it, or
    an `ErrorClass.X` in the gateway's code, must exist."""
    carried = {cls.error_class for cls in exception_classes()}
    named: set[str] = set()
    for path in (ROOT / "gateway").rglob("*.py"):
        if path.parent != CODES_MODULE.parent:
            named |= set(re.findall(r"\bErrorClass\.([A-Z][A-Z0-9_]*)", path.read_text()))
    unused = [m for m in ErrorClass if m not in carried and m.name not in named]
    assert unused == []


def test_unexpected_exceptions_are_stored_one_way_by_the_worker_and_by_replay() -> None:
    """One code for every bug, the exception's type in the message and in the detail."""
    exc = raise_and_catch(KeyError("x"))
    assert dispose(exc, 1, lambda: 0.5).error_class is ErrorClass.UNEXPECTED_ERROR
    worker = failure_of(exc, "".join(traceback.format_exception(exc)))
    replayed = replay.failure_of(exc)
    for failure in (worker, replayed):
        assert failure.error_class is ErrorClass.UNEXPECTED_ERROR
        assert failure.message == "KeyError: 'x'"
        assert failure.detail is not None
        assert failure.detail.rstrip().splitlines()[-1] == "KeyError: 'x'"
    assert errors.error_class_of(exc) is ErrorClass.UNEXPECTED_ERROR


def test_our_errors_keep_their_code_in_the_worker_and_in_replay() -> None:
    """A replay that fails as the worker did leaves the row's code as it was; only the
    permanent error's stack is left out by replay (its message says it all)."""
    for exc, stack_in_replay in (
        (errors.UnknownMerchant("no account for m_1"), False),
        (errors.LedgerUnavailable("timeout"), True),
        (errors.RetriesExhausted(errors.RateStale("usd/eur")), False),
    ):
        caught = raise_and_catch(exc)
        worker = failure_of(caught, "".join(traceback.format_exception(caught)))
        replayed = replay.failure_of(caught)
        assert worker.error_class is replayed.error_class is exc.error_class
        assert worker.message == replayed.message == str(exc)
        assert worker.detail is not None
        assert (replayed.detail is not None) is stack_in_replay


def test_the_error_code_page_has_a_row_and_advice_for_every_member() -> None:
    """The documentation's table comes from the enum: one row per code, none without
    advice (whether the committed page is current is the reference pages' own test)."""
    assert set(error_codes.ACTIONS) == set(ErrorClass)
    page = error_codes.render()
    assert page.count("\n| `") == len(ErrorClass)
    for member in ErrorClass:
        assert f"| `{member.value}` | {member.family.value} |" in page


def test_a_not_found_message_names_at_most_twenty_ids() -> None:
    """A replay may name 100,000 ids that do not exist: the one line stays one line."""
    from gateway.errors import DlqRowNotFound

    assert str(DlqRowNotFound([3, 1])) == "no dead-letter row with id 3, 1"
    many = DlqRowNotFound(list(range(1, 100_001)))
    assert str(many).endswith("19, 20 and 99980 more")
    assert many.ids[-1] == 100_000
