"""`gateway forward` and `gateway listen` are ordered per key unless told otherwise, as
their help and docs/forwarding.md say."""

from __future__ import annotations

import pytest

from gateway.cli import build_parser


@pytest.mark.parametrize(
    ("argv", "unordered"),
    [
        (["forward", "--to", "http://t.example"], False),
        (["listen", "--to", "http://t.example"], False),
        (["forward", "--to", "http://t.example", "--ordered"], False),
        (["forward", "--to", "http://t.example", "--unordered"], True),
        (["listen", "--to", "http://t.example", "--unordered"], True),
    ],
)
def test_ordered_per_key_is_the_default(argv: list[str], unordered: bool) -> None:
    assert build_parser().parse_args(argv).unordered is unordered
