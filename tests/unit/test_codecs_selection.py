"""Which codecs run (``vehicle_middleware.server.codecs``): the fast ones unless the entry point
says so."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from vehicle_middleware.server import codecs
from vehicle_middleware.server.__main__ import _select_codecs


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    before = codecs.selected()
    yield
    codecs.select(before.value)


def test_the_fast_codecs_run_unless_another_is_selected() -> None:
    assert codecs.selected() is codecs.Codecs.FAST
    assert codecs.select("reference") is codecs.selected() is codecs.Codecs.REFERENCE
    assert codecs.select("fast") is codecs.selected() is codecs.Codecs.FAST


def test_an_unknown_name_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="codecs 'quick': known are fast, reference"):
        codecs.select("quick")
    assert codecs.selected() is codecs.Codecs.FAST


@pytest.mark.parametrize(
    ("value", "chosen"),
    [
        ("1", codecs.Codecs.REFERENCE),
        (" 1 ", codecs.Codecs.REFERENCE),
        ("0", codecs.Codecs.FAST),
        ("", codecs.Codecs.FAST),
    ],
)
def test_the_entry_point_selects_by_vmw_reference_codecs(value: str, chosen: codecs.Codecs) -> None:
    assert _select_codecs(value) is codecs.selected() is chosen


def test_the_entry_point_refuses_another_value_of_vmw_reference_codecs() -> None:
    with pytest.raises(ValueError, match="VMW_REFERENCE_CODECS='yes': 1 runs the reference"):
        _select_codecs("yes")
    assert codecs.selected() is codecs.Codecs.FAST
