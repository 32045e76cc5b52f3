"""VSS JSON catalogs: the shipped one, instance expansion as vss-tools does it, errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from vehicle_middleware.providers.catalog import (
    CatalogError,
    default_catalog,
    expand_instances,
    load_catalog,
    parse_catalog,
)
from vehicle_middleware.vss import expected_period


def test_the_shipped_catalog_has_a_few_hundred_realistic_unique_keys() -> None:
    signals = default_catalog()
    names = [s.name for s in signals]
    assert 200 <= len(signals) <= 1000
    assert len(set(names)) == len(names)
    assert "Vehicle.Body.Windows.Row2.Right.Level" in names  # docs/design.md's example key
    for expected in (
        "Vehicle.Speed",
        "Vehicle.Chassis.Axle.Row1.Wheel.Left.Speed",
        "Vehicle.Cabin.HVAC.Zone.Row2.Right.Temperature",
        "Vehicle.Cabin.Seat.Row2.Middle.Position",
        "Vehicle.Powertrain.TractionBattery.StateOfCharge.Current",
        "Vehicle.CurrentLocation.Latitude",
    ):
        assert expected in names
    assert {s.type for s in signals} == {"sensor", "actuator", "attribute"}


@pytest.mark.parametrize(
    ("instances", "dims"),
    [
        ("Row[1,3]", [["Row1", "Row2", "Row3"]]),
        (["Left", "Right"], [["Left", "Right"]]),
        (
            ["Row[1,2]", ["DriverSide", "PassengerSide"]],
            [["Row1", "Row2"], ["DriverSide", "PassengerSide"]],
        ),
        (["Row[1,2]", "Pos[1,2]"], [["Row1", "Row2"], ["Pos1", "Pos2"]]),
        (
            ["Row[1,2]", "DriverSide", "PassengerSide"],
            [["Row1", "Row2"], ["DriverSide", "PassengerSide"]],
        ),
        ("Front", [["Front"]]),
    ],
)
def test_instances_expand_like_vss_tools(instances: Any, dims: list[list[str]]) -> None:
    assert expand_instances(instances) == dims


def _tree(instances: Any = None) -> dict[str, Any]:
    door: dict[str, Any] = {
        "type": "branch",
        "description": "Doors.",
        "children": {
            "IsOpen": {"type": "actuator", "datatype": "boolean", "description": "Open."},
            "Count": {"type": "attribute", "datatype": "uint8", "instantiate": False},
        },
    }
    if instances is not None:
        door["instances"] = instances
    return {"Vehicle": {"type": "branch", "children": {"Door": door}}}


def test_an_unexpanded_tree_gives_the_leaves_of_the_expanded_one() -> None:
    names = [s.name for s in parse_catalog(_tree(["Row[1,2]", ["Left", "Right"]]))]
    assert names == [
        "Vehicle.Door.Count",  # instantiate: false, not repeated
        "Vehicle.Door.Row1.Left.IsOpen",
        "Vehicle.Door.Row1.Right.IsOpen",
        "Vehicle.Door.Row2.Left.IsOpen",
        "Vehicle.Door.Row2.Right.IsOpen",
    ]
    expanded = {
        "Vehicle": {
            "type": "branch",
            "children": {
                "Door": {
                    "type": "branch",
                    "children": {
                        "Count": {"type": "attribute", "datatype": "uint8"},
                        **{
                            row: {
                                "type": "branch",
                                "children": {
                                    side: {
                                        "type": "branch",
                                        "children": {
                                            "IsOpen": {"type": "actuator", "datatype": "boolean"}
                                        },
                                    }
                                    for side in ("Left", "Right")
                                },
                            }
                            for row in ("Row1", "Row2")
                        },
                    },
                }
            },
        }
    }
    assert [s.name for s in parse_catalog(expanded)] == names


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda t: t["Vehicle"]["children"]["Door"]["children"]["IsOpen"].pop("datatype"),
            r"Vehicle\.Door\.IsOpen: a actuator needs a datatype",
        ),
        (
            lambda t: t["Vehicle"]["children"]["Door"]["children"]["IsOpen"].update(type="signal"),
            r"Vehicle\.Door\.IsOpen: type 'signal'",
        ),
        (
            lambda t: t["Vehicle"]["children"]["Door"]["children"]["IsOpen"].update(min=5, max=1),
            r"min 5 is above max 1",
        ),
        (
            lambda t: t["Vehicle"]["children"]["Door"].update(instances=[{"x": 1}]),
            r"Vehicle\.Door\.instances",
        ),
        (
            lambda t: t["Vehicle"]["children"]["Door"].update(instances="Row[3,1]"),
            r"range 'Row\[3,1\]' is empty",
        ),
        (
            lambda t: t["Vehicle"]["children"]["Door"]["children"].update({"Bad-Name": {}}),
            r"'Bad-Name' is not a node name",
        ),
    ],
)
def test_a_bad_node_is_refused_naming_its_path(mutate: Any, message: str) -> None:
    tree = _tree()
    mutate(tree)
    with pytest.raises(CatalogError, match=message):
        parse_catalog(tree)


def test_a_name_defined_twice_is_refused() -> None:
    tree = _tree(["Row1", "Row1"])
    with pytest.raises(CatalogError, match=r"Vehicle\.Door\.Row1\.IsOpen: defined twice"):
        parse_catalog(tree)


def test_a_file_that_is_not_json_is_refused_naming_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "vss.json"
    bad.write_text("{not json")
    with pytest.raises(CatalogError, match=r"vss\.json: not JSON"):
        load_catalog(bad)
    with pytest.raises(CatalogError, match="cannot read"):
        load_catalog(tmp_path / "missing.json")
    good = tmp_path / "ok.json"
    good.write_text(json.dumps(_tree("Front")))
    assert [s.name for s in load_catalog(good)] == [
        "Vehicle.Door.Count",
        "Vehicle.Door.Front.IsOpen",
    ]


def test_a_signal_is_expected_by_its_attribute_else_by_its_rate() -> None:
    tree = _tree()
    leaf = tree["Vehicle"]["children"]["Door"]["children"]["IsOpen"]

    def period() -> float | None:
        by_name = {s.name: expected_period(s) for s in parse_catalog(tree)}
        assert by_name["Vehicle.Door.Count"] is None  # an attribute with no rate
        return by_name["Vehicle.Door.IsOpen"]

    assert period() is None  # no rate, no attribute
    leaf["sim"] = {"hz": 2}
    assert period() == 1.5  # 3 periods of 0.5 s
    leaf["sim"] = {"hz": 20}
    assert period() == 1.0  # at least 1 s
    leaf["expected_period_s"] = 0.25
    assert period() == 0.25  # the attribute wins
    del leaf["expected_period_s"]
    leaf["type"] = "attribute"
    assert period() is None  # written once: never stale by its rate
    leaf["expected_period_s"] = "soon"
    with pytest.raises(CatalogError, match=r"IsOpen\.expected_period_s: must be seconds above 0"):
        parse_catalog(tree)
