# SPDX-License-Identifier: Apache-2.0
"""The package itself: version, type stubs, and bosch.Options generated from
the C++ field table (every field reachable by its name, checked on input)."""

import ast
import importlib.metadata
import json
import pathlib
import re

import numpy as np
import pytest

import bosch

from conftest import ROOT


def planted(mask):
    return -float(np.count_nonzero(mask))


def test_version_matches_the_cpp_header_and_the_wheel():
    header = (ROOT / "include" / "bosch" / "version.hpp").read_text()
    parts = [re.search(rf"#define BOSCH_VERSION_{p} (\d+)", header).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
    assert bosch.__version__ == ".".join(parts)
    assert importlib.metadata.version("bosch") == bosch.__version__


def test_installed_package_has_type_stubs_listing_every_option():
    pkg = pathlib.Path(bosch.__file__).parent
    assert (pkg / "py.typed").exists()
    stub = (pkg / "_bosch.pyi").read_text()
    ast.parse(stub)  # valid Python
    select_line = next(line for line in stub.splitlines() if line.startswith("def select("))
    options_init = re.search(r"class Options:.*?def __init__\(self, \*, (.*?)\) -> None", stub, re.S).group(1)
    for field in bosch.Options.fields():
        # stubgen imports typing.Literal, collections.abc.Sequence by their last name
        annotation = f"{field['name']}: " + re.sub(r"(?<![\w.])(typing|collections\.abc)\.", "", field["type"])
        assert annotation in select_line, field["name"]
        assert annotation in options_init, field["name"]
    assert "class InvalidArgument(Error, ValueError)" in stub


def test_options_fields_are_the_cpp_table():
    # to_json() is the C++ options_to_json, generated from the same table.
    cpp_names = list(json.loads(bosch.Options().to_json()))
    fields = bosch.Options.fields()
    assert sorted(f["cpp_name"] for f in fields) == sorted(cpp_names)  # JSON keys are sorted
    assert len(cpp_names) >= 20
    for f in fields:
        assert f["role"] in ("search", "run")
        assert f["help"]
        # Every field is an attribute and a keyword, with its default.
        assert getattr(bosch.Options(), f["name"]) == f["default"]
        o = bosch.Options(**{f["name"]: f["default"]})
        assert o == bosch.Options()


def test_options_round_trip_through_json_and_dict():
    o = bosch.Options(seed=7, variant="layer", ratio_levels=[0.25, 0.5], lambda_=6, accept_equal=False, alpha=2.5)
    assert bosch.Options.from_json(o.to_json()) == o
    d = o.to_dict()
    assert d["variant"] == "layer" and d["ratio_levels"] == [0.25, 0.5] and d["lambda_"] == 6
    assert bosch.Options(**d) == o
    assert repr(o) == "Options(seed=7, variant='layer', ratio_levels=[0.25, 0.5], lambda_=6, accept_equal=False, alpha=2.5)"
    copy = bosch.Options(o)
    copy.seed = 8
    assert o.seed == 7


def test_python_keyword_fields_take_a_trailing_underscore_or_the_cpp_name():
    assert bosch.Options(lambda_=5).lambda_ == 5
    assert bosch.Options(**{"lambda": 5}).lambda_ == 5
    r = bosch.select(planted, "4x2", 0.5, max_evaluations=5, **{"lambda": 2})
    assert r.options.lambda_ == 2


@pytest.mark.parametrize(
    "field, value, fragment",
    [
        ("probe_budget", 0, "must be at least 1, got 0"),
        ("target_ratio", 1.5, "SWA ratio must lie in (0, 1)"),
        ("max_evaluations", 2, "at least 3"),
        ("variant", "fast", "expected one of: full, single, multi, layer"),
        ("ratio_levels", [0.5, 2.0], "every level must lie in [0, 1]"),
        ("mutation_rate", -0.1, "must lie in [0, 1]"),
        ("seed", -1, "must lie in [0, 18446744073709551615]"),
        ("max_vars", 2**40, "must lie in [-2147483648, 2147483647]"),
    ],
)
def test_a_bad_value_raises_value_error_naming_the_field(field, value, fragment):
    select_args = {field: value} if field == "target_ratio" else {"ratio": 0.5, field: value}
    for attempt in (lambda: bosch.Options(**{field: value}),
                    lambda: bosch.select(planted, "4x2", **select_args)):
        with pytest.raises(ValueError) as e:
            attempt()
        assert isinstance(e.value, bosch.InvalidArgument)
        assert e.value.where == field
        assert str(e.value).startswith(field + ": ")
        assert fragment in str(e.value)
    o = bosch.Options()
    with pytest.raises(bosch.InvalidArgument, match=field):
        setattr(o, field, value)


@pytest.mark.parametrize("field, value", [("seed", "3"), ("seed", 2.0), ("accept_equal", 1),
                                          ("alpha", "x"), ("variant", 1), ("ratio_levels", "0.5")])
def test_a_wrongly_typed_value_raises_type_error_naming_the_field(field, value):
    with pytest.raises(TypeError, match=f"^{field}: expected"):
        bosch.Options(**{field: value})


def test_numpy_scalars_are_accepted():
    o = bosch.Options(seed=np.uint64(5), alpha=np.float32(0.5), accept_equal=np.bool_(False),
                      ratio_levels=np.array([0.25, 0.75]))
    assert (o.seed, o.alpha, o.accept_equal, o.ratio_levels) == (5, 0.5, False, [0.25, 0.75])


def test_unknown_keywords_are_type_errors():
    with pytest.raises(TypeError, match="unexpected keyword argument 'sed'"):
        bosch.select(planted, "4x2", 0.5, sed=1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'sed'"):
        bosch.Options(sed=1)
    with pytest.raises(TypeError, match="both ratio and target_ratio"):
        bosch.select(planted, "4x2", 0.5, target_ratio=0.5)


def test_layouts():
    lay = bosch.HeadLayout(30, 9, 3)
    assert str(lay) == "30x9x3" and tuple(lay) == (30, 9, 3) and lay.shape == (30, 3)
    assert lay == bosch.HeadLayout("30x9x3") and hash(lay) == hash(bosch.HeadLayout(30, 9, 3))
    assert (lay.size, lay.group_size) == (90, 3)
    assert bosch.target_count("30x9x3", 0.5) == 45 == bosch.target_count((30, 9, 3), 0.5)
    with pytest.raises(bosch.InvalidArgument, match="layout"):
        bosch.HeadLayout(30, 8, 3)
    with pytest.raises(bosch.InvalidArgument, match="expected LxHqxHkv"):
        bosch.target_count("30by3", 0.5)
    with pytest.raises(bosch.InvalidArgument) as e:
        bosch.select(planted, (30, 3, 3, 1), 0.5)
    assert e.value.where == "layout"
