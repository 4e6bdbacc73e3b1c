# SPDX-License-Identifier: Apache-2.0
"""Mask files between Python and the `bosch` program (files compared byte for
byte), read errors, the layer baselines against `bosch baseline`, and
mask_from_scores."""

import json

import numpy as np
import pytest

import bosch

from conftest import run

LAYOUT = bosch.HeadLayout(6, 8, 4)


@pytest.fixture()
def mask():
    return bosch.layer_rand(LAYOUT, 0.5, seed=3) ^ bosch.layer_intr(LAYOUT, 0.25)


def test_python_and_the_bosch_program_write_the_same_files(bosch_cli, tmp_path, mask):
    meta = {"model": "toy", "score": -0.125, "window": 64, "nested": {"a": [1, 2]}}
    bosch.write_mask(tmp_path / "py.json", mask, LAYOUT, metadata=meta)
    bosch.write_mask(tmp_path / "py.tsv", mask, LAYOUT)
    bosch.write_mask(tmp_path / "py.txt", mask, LAYOUT)
    # The program converts the Python JSON to each form (JSON to JSON keeps the metadata).
    for ext in ("json", "tsv", "txt"):
        run([bosch_cli, "convert", tmp_path / "py.json", tmp_path / f"cli.{ext}"])
        assert (tmp_path / f"cli.{ext}").read_bytes() == (tmp_path / f"py.{ext}").read_bytes(), ext
    # ... and the Python TSV and grid back to JSON, which Python reads.
    for ext in ("tsv", "txt"):
        run([bosch_cli, "convert", "--layout", str(LAYOUT), tmp_path / f"py.{ext}", tmp_path / f"back-{ext}.json"])
        f = bosch.read_mask(tmp_path / f"back-{ext}.json")
        assert np.array_equal(f.mask, mask) and f.layout == LAYOUT and f.metadata == {}
    f = bosch.read_mask(tmp_path / "cli.json", LAYOUT)
    assert np.array_equal(f.mask, mask) and f.metadata == meta


def test_read_forms_and_layouts(tmp_path, mask):
    for ext in ("json", "tsv", "txt"):
        bosch.write_mask(tmp_path / f"m.{ext}", mask, LAYOUT)
        f = bosch.read_mask(tmp_path / f"m.{ext}", LAYOUT)
        assert np.array_equal(f.mask, mask) and f.mask.dtype == np.bool_ and f.layout == LAYOUT
    # TSV and grid files carry no query-head count: without a layout it equals the KV heads.
    assert bosch.read_mask(tmp_path / "m.tsv").layout == bosch.HeadLayout(6, 4, 4)
    assert bosch.read_mask(tmp_path / "m.txt", format="grid").layout == bosch.HeadLayout(6, 4, 4)
    assert (tmp_path / "m.txt").read_text() == bosch.to_grid(mask)
    # DuoAttention gates: values >= threshold mean full attention.
    (tmp_path / "gates.tsv").write_text("0.9\t0.2\n0.4\t0.6\n")
    assert bosch.read_mask(tmp_path / "gates.tsv").mask.tolist() == [[False, True], [True, False]]
    assert bosch.read_mask(tmp_path / "gates.tsv", threshold=0.3).mask.tolist() == [[False, True], [False, False]]
    # Integer 0/1 masks are accepted; other values are not.
    bosch.write_mask(tmp_path / "ints.txt", mask.astype(np.int8))
    assert np.array_equal(bosch.read_mask(tmp_path / "ints.txt").mask, mask)


def test_read_errors_name_the_file_and_the_place(tmp_path, mask):
    bosch.write_mask(tmp_path / "m.json", mask, LAYOUT)
    with pytest.raises(bosch.InvalidArgument, match="does not match the expected layout") as e:
        bosch.read_mask(tmp_path / "m.json", "6x4x4")
    assert e.value.where == str(tmp_path / "m.json")
    (tmp_path / "bad.json").write_text(json.dumps({"format": "bosch.head_mask", "version": 1,
                                                   "layout": {"num_layers": 1, "num_query_heads": 2,
                                                              "num_kv_heads": 2}, "swa": [[0, 5]]}))
    with pytest.raises(bosch.FormatError, match=r"swa\[0\]: KV head 5 outside \[0, 2\)") as e:
        bosch.read_mask(tmp_path / "bad.json")
    assert isinstance(e.value, ValueError)
    (tmp_path / "bad.txt").write_text("S.\nS\n")
    with pytest.raises(bosch.FormatError, match="line 2: 1 heads, expected 2"):
        bosch.read_mask(tmp_path / "bad.txt")
    with pytest.raises(bosch.FileError) as e:
        bosch.read_mask(tmp_path / "missing.json")
    assert isinstance(e.value, OSError)
    with pytest.raises(bosch.InvalidArgument, match="shape"):
        bosch.write_mask(tmp_path / "x.json", np.zeros((5, 4), bool), LAYOUT)
    with pytest.raises(TypeError, match="expected a bool array"):
        bosch.write_mask(tmp_path / "x.json", np.zeros((6, 4)), LAYOUT)
    with pytest.raises(bosch.InvalidArgument, match="only 0 and 1"):
        bosch.write_mask(tmp_path / "x.json", np.full((6, 4), 2), LAYOUT)
    with pytest.raises(bosch.InvalidArgument, match="metadata"):
        bosch.write_mask(tmp_path / "x.json", mask, LAYOUT, metadata={"score": float("nan")})


def test_a_result_is_written_with_its_metadata(tmp_path):
    r = bosch.select(lambda m: -float(m[:, 0].sum()) - 0.5 * float(m.sum()), LAYOUT, 0.5, seed=2)
    bosch.write_mask(tmp_path / "r.json", r, metadata={"model": "toy"})
    f = bosch.read_mask(tmp_path / "r.json")
    assert np.array_equal(f.mask, r.mask) and f.layout == LAYOUT
    assert f.metadata == {**r.metadata(), "model": "toy"}
    bosch.write_mask(tmp_path / "copy.json", f)
    assert (tmp_path / "copy.json").read_bytes() == (tmp_path / "r.json").read_bytes()


@pytest.mark.parametrize("method", ["RAND", "BME", "INTR"])
@pytest.mark.parametrize("ratio", [0.3, 0.5])
@pytest.mark.parametrize("layer_count", ["exact", "whole"])
def test_layer_baselines_match_the_bosch_program(bosch_cli, stories_model, tmp_path, method, ratio, layer_count):
    out = tmp_path / "cli.json"
    run([bosch_cli, "baseline", stories_model, "--method", method, "--ratio", ratio, "--seed", 7,
         "--layer-count", layer_count, "-o", out, "--quiet"])
    cli = bosch.read_mask(out)
    whole = layer_count == "whole"
    fn = {"RAND": lambda: bosch.layer_rand(cli.layout, ratio, 7, whole_layers=whole),
          "BME": lambda: bosch.layer_bme(cli.layout, ratio, whole_layers=whole),
          "INTR": lambda: bosch.layer_intr(cli.layout, ratio, whole_layers=whole)}[method]
    assert np.array_equal(fn(), cli.mask)


def test_layer_baselines_have_the_target_count():
    for fn in (lambda: bosch.layer_rand("30x9x3", 0.5, 1), lambda: bosch.layer_bme("30x9x3", 0.5),
               lambda: bosch.layer_intr("30x9x3", 0.5)):
        m = fn()
        assert m.shape == (30, 3) and int(m.sum()) == 45
        assert int((m.sum(axis=1) % 3 != 0).sum()) <= 1  # whole layers, at most one partial
    assert not np.array_equal(bosch.layer_rand("30x9x3", 0.5, 1), bosch.layer_rand("30x9x3", 0.5, 2))


def test_mask_from_scores():
    scores = np.array([[0.9, 0.1, 0.5], [0.2, 0.8, 0.3], [0.05, 0.7, 0.6]])
    m = bosch.mask_from_scores(scores, 0.34)  # round(0.34 * 9) = 3 lowest scores become SWA
    assert m.tolist() == [[False, True, False], [True, False, False], [True, False, False]]
    p = bosch.mask_from_scores(scores, 0.34, quota="per_layer")  # one per layer
    assert p.tolist() == [[False, True, False], [True, False, False], [True, False, False]]
    p = bosch.mask_from_scores(scores, 0.67, quota="per_layer")  # 6: two per layer
    assert p.sum(axis=1).tolist() == [2, 2, 2] and p[0].tolist() == [False, True, True]
    ties = bosch.mask_from_scores(np.zeros((2, 2)), 0.5)  # ties: lower flat index first
    assert ties.tolist() == [[True, True], [False, False]]
    with pytest.raises(bosch.InvalidArgument, match="not finite"):
        bosch.mask_from_scores([[0.0, np.inf]], 0.5)
    with pytest.raises(bosch.InvalidArgument, match="quota"):
        bosch.mask_from_scores(scores, 0.5, quota="layer")


def test_turnover_and_jaccard():
    a = np.array([[True, True], [False, False]])
    b = np.array([[True, False], [True, False]])
    assert bosch.turnover(a, b) == pytest.approx(0.5)
    assert bosch.jaccard_distance(a, b) == pytest.approx(1 - 1 / 3)
    assert bosch.turnover(a, a) == 0.0
