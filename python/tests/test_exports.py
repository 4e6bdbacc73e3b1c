# SPDX-License-Identifier: Apache-2.0
"""Mask exports (docs/deployment.md): write_mask(format=kvpress|duo|hf|gguf|layers)
writes what `bosch convert --to` writes, byte for byte; read_mask reads it
back; kvpress's argsort at the recorded ratio gives exactly the mask; the
`gguf` package reads the GGUF copy's windows (when it is installed)."""

import json

import numpy as np
import pytest

import bosch

from conftest import run

LAYOUT = bosch.HeadLayout(6, 8, 4)


def layer_mask(layout, swa_layers):
    m = np.zeros(layout.shape, dtype=bool)
    m[list(swa_layers), :] = True
    return m


def kvpress_streaming(scores, ratio):
    """kvpress's DuoAttentionPress.__post_init_from_model__: the round(n * ratio)
    lowest scores (np.argsort over the flattened array) stream."""
    n_pruned = round(scores.size * ratio)
    streaming = np.zeros(scores.shape, dtype=bool)
    if n_pruned > 0:
        idx = np.argsort(scores, axis=None)[:n_pruned]
        streaming[np.unravel_index(idx, scores.shape)] = True
    return streaming


def test_kvpress_pattern_matches_the_program_and_kvpress_reproduces_the_mask(bosch_cli, tmp_path):
    rng = np.random.default_rng(5)
    mask = rng.random(LAYOUT.shape) < 0.4
    meta = {"window": 48, "sinks": 2, "layer_drops": [0.5, 0.1, None, 0.3, 0.2, 0.9]}
    bosch.write_mask(tmp_path / "m.json", mask, LAYOUT, metadata=meta)
    f = bosch.read_mask(tmp_path / "m.json")
    bosch.write_mask(tmp_path / "py", f, format="kvpress")
    run([bosch_cli, "convert", tmp_path / "m.json", "--to", "kvpress", "-o", tmp_path / "cli"])
    for name in ("full_attention_heads.tsv", "config.json"):
        assert (tmp_path / "py" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes(), name
    # What kvpress and DuoAttention load (numpy.loadtxt, clipped to [0, 1]).
    scores = np.clip(np.loadtxt(tmp_path / "py" / "full_attention_heads.tsv", delimiter="\t", ndmin=2), 0, 1)
    config = json.loads((tmp_path / "py" / "config.json").read_text())
    assert scores.shape == LAYOUT.shape
    assert (config["sink_size"], config["recent_size"]) == (2, 48)
    assert np.array_equal(kvpress_streaming(scores, config["head_compression_ratio"]), mask)
    assert np.array_equal(scores < 0.5, mask)  # DuoAttention's threshold 0.5
    # One head fewer: the spared SWA head is one of the layer with the largest known drop.
    fewer = kvpress_streaming(scores, (mask.sum() - 1) / mask.size)
    spared = np.argwhere(mask & ~fewer)
    assert len(spared) == 1 and (fewer <= mask).all()
    swa_layers = sorted({int(l) for l in np.nonzero(mask)[0]})
    expected_layer = max(swa_layers, key=lambda l: float("inf") if meta["layer_drops"][l] is None else meta["layer_drops"][l])
    assert spared[0][0] == expected_layer
    # Read back, windows in the metadata; "duo" is the same format.
    back = bosch.read_mask(tmp_path / "py", format="duo")
    assert np.array_equal(back.mask, mask) and back.layout == LAYOUT
    assert back.metadata == {"window": 48, "sinks": 2}


def test_hf_and_layers_exports_and_the_head_level_refusal(bosch_cli, tmp_path):
    mask = layer_mask(LAYOUT, [0, 3, 4])
    bosch.write_mask(tmp_path / "m.json", mask, LAYOUT, metadata={"window": 32})
    f = bosch.read_mask(tmp_path / "m.json")
    bosch.write_mask(tmp_path / "py-hf.json", f, format="hf")
    run([bosch_cli, "convert", tmp_path / "m.json", "--to", "hf", "-o", tmp_path / "cli-hf.json"])
    assert (tmp_path / "py-hf.json").read_bytes() == (tmp_path / "cli-hf.json").read_bytes()
    patch = json.loads((tmp_path / "py-hf.json").read_text())
    assert len(patch["layer_types"]) == LAYOUT.num_layers
    assert [t == "sliding_attention" for t in patch["layer_types"]] == list(mask[:, 0])
    assert patch["sliding_window"] == 32 and patch["use_sliding_window"] is True
    assert np.array_equal(bosch.read_mask(tmp_path / "py-hf.json", LAYOUT, format="hf").mask, mask)

    bosch.write_mask(tmp_path / "py-layers.json", f, format="layers", max_seq_len=4096)
    run([bosch_cli, "convert", tmp_path / "m.json", "--to", "layers", "--max-seq-len", "4096",
         "-o", tmp_path / "cli-layers.json"])
    assert (tmp_path / "py-layers.json").read_bytes() == (tmp_path / "cli-layers.json").read_bytes()
    doc = json.loads((tmp_path / "py-layers.json").read_text())
    assert doc["max_attention_window"] == [32 if s else 4096 for s in mask[:, 0]]
    assert doc["swa_attention_layer_ids"] == [0, 3, 4]
    back = bosch.read_mask(tmp_path / "py-layers.json", LAYOUT, format="layers")
    assert np.array_equal(back.mask, mask) and back.metadata == {"window": 32, "sinks": 0}

    head = mask.copy()
    head[1, 2] = True
    for fmt in ("hf", "layers"):
        with pytest.raises(bosch.InvalidArgument, match="head-level.*layer 1.*kvpress"):
            bosch.write_mask(tmp_path / f"x-{fmt}.json", head, LAYOUT, format=fmt, window=32, max_seq_len=4096)
        assert not (tmp_path / f"x-{fmt}.json").exists()
    with pytest.raises(bosch.InvalidArgument, match="window"):
        bosch.write_mask(tmp_path / "x", mask, LAYOUT, format="kvpress")  # no window anywhere
    with pytest.raises(bosch.InvalidArgument, match="layout"):
        bosch.read_mask(tmp_path / "py-hf.json", format="hf")


def test_gguf_export_read_by_bosch_and_by_the_gguf_package(bosch_cli, stories_model, tmp_path):
    info = json.loads(run([bosch_cli, "inspect", stories_model, "--json"]).stdout)["layout"]
    model_layout = bosch.HeadLayout(info["num_layers"], info["num_query_heads"], info["num_kv_heads"])
    with pytest.raises(bosch.InvalidArgument, match="model"):
        bosch.write_mask(tmp_path / "x.gguf", np.zeros((1, 1), dtype=bool), format="gguf", window=8)
    # A mask of another layout is refused, naming both layouts, before anything is written.
    with pytest.raises(bosch.InvalidArgument, match=f"1x1x1.*does not fit the model's layout {model_layout}"):
        bosch.write_mask(tmp_path / "x.gguf", np.zeros((1, 1), dtype=bool), format="gguf", window=8,
                         model=stories_model)
    assert not (tmp_path / "x.gguf").exists()
    mask = layer_mask(model_layout, [0, model_layout.num_layers - 1])
    bosch.write_mask(tmp_path / "swa.gguf", mask, model_layout, format="gguf", window=16, model=stories_model)
    back = bosch.read_mask(tmp_path / "swa.gguf", format="gguf")
    assert np.array_equal(back.mask, mask) and back.layout == model_layout
    assert back.metadata == {"window": 16, "sinks": 0}

    gguf = pytest.importorskip("gguf")
    reader = gguf.GGUFReader(str(tmp_path / "swa.gguf"))
    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()
    window = reader.fields[f"{arch}.attention.sliding_window"]
    assert window.types == [gguf.GGUFValueType.UINT32]
    assert int(window.parts[-1][0]) == 16
    pattern = reader.fields[f"{arch}.attention.sliding_window_pattern"]
    assert pattern.types == [gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.BOOL]
    assert [bool(pattern.parts[i][0]) for i in pattern.data] == list(mask[:, 0])
    # The tensors are the source's.
    src = gguf.GGUFReader(str(stories_model))
    assert [t.name for t in reader.tensors] == [t.name for t in src.tensors]
    for a, b in zip(src.tensors, reader.tensors):
        assert np.array_equal(np.asarray(a.data), np.asarray(b.data)), a.name
