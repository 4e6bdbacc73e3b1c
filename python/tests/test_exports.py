# SPDX-License-Identifier: Apache-2.0
"""Mask exports (docs/deployment.md): write_mask(format=kvpress|duo|hf|gguf|layers)
writes what `bosch convert --to` writes, byte for byte; read_mask reads it
back; kvpress's argsort at the recorded ratio gives exactly the mask; the
`hf` and `gguf` exports need the model's architecture and refuse where the
engine would ignore the windows (test_engine_exports.py shows it in
transformers)."""

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
    bosch.write_mask(tmp_path / "m.json", mask, LAYOUT, metadata={"window": 32, "architecture": "qwen2"})
    f = bosch.read_mask(tmp_path / "m.json")
    bosch.write_mask(tmp_path / "py-hf.json", f, format="hf")
    run([bosch_cli, "convert", tmp_path / "m.json", "--to", "hf", "-o", tmp_path / "cli-hf.json"])
    assert (tmp_path / "py-hf.json").read_bytes() == (tmp_path / "cli-hf.json").read_bytes()
    patch = json.loads((tmp_path / "py-hf.json").read_text())
    assert len(patch["layer_types"]) == LAYOUT.num_layers
    assert [t == "sliding_attention" for t in patch["layer_types"]] == list(mask[:, 0])
    assert patch["sliding_window"] == 32 and patch["use_sliding_window"] is True
    assert patch["max_window_layers"] == LAYOUT.num_layers  # what vLLM's Qwen2 insists on
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
            bosch.write_mask(tmp_path / f"x-{fmt}.json", head, LAYOUT, format=fmt, window=32, max_seq_len=4096,
                             arch="qwen2")
        assert not (tmp_path / f"x-{fmt}.json").exists()
    with pytest.raises(bosch.InvalidArgument, match="window"):
        bosch.write_mask(tmp_path / "x", mask, LAYOUT, format="kvpress")  # no window anywhere
    with pytest.raises(bosch.InvalidArgument, match="layout"):
        bosch.read_mask(tmp_path / "py-hf.json", format="hf")


def test_gguf_export_refused_for_the_architectures_llama_cpp_ignores(stories_model, tmp_path):
    with pytest.raises(bosch.InvalidArgument, match="model"):
        bosch.write_mask(tmp_path / "x.gguf", np.zeros((1, 1), dtype=bool), format="gguf", window=8)
    # A mask of another layout is refused, naming both layouts, before anything is written.
    with pytest.raises(bosch.InvalidArgument, match="1x1x1.*does not fit the model's layout"):
        bosch.write_mask(tmp_path / "x.gguf", np.zeros((1, 1), dtype=bool), format="gguf", window=8,
                         model=stories_model)
    assert not (tmp_path / "x.gguf").exists()
    # stories260K is a llama model: llama.cpp's llama graph attends fully.
    layout = bosch.HeadLayout(5, 8, 4)
    mask = layer_mask(layout, [0, 4])
    refusal = "llama.cpp would ignore.*llama graph attends fully.*bosch generate"
    with pytest.raises(bosch.InvalidArgument, match=refusal):
        bosch.write_mask(tmp_path / "swa.gguf", mask, layout, format="gguf", window=16, model=stories_model)
    assert not (tmp_path / "swa.gguf").exists()


def test_hf_export_architecture_from_metadata_arg_or_model(bosch_cli, stories_model, tmp_path):
    mask = layer_mask(LAYOUT, [1, 2])
    # No architecture anywhere: refused, asking for it, rather than guessed.
    with pytest.raises(bosch.InvalidArgument, match="architecture.*model= or arch="):
        bosch.write_mask(tmp_path / "x.json", mask, LAYOUT, format="hf", window=16)
    assert not (tmp_path / "x.json").exists()
    # arch= names it; the same bytes as the program's --arch.
    bosch.write_mask(tmp_path / "m.json", mask, LAYOUT, metadata={"window": 16})
    for arch in ("qwen2", "qwen3"):
        bosch.write_mask(tmp_path / f"py-{arch}.json", bosch.read_mask(tmp_path / "m.json"), format="hf", arch=arch)
        run([bosch_cli, "convert", tmp_path / "m.json", "--to", "hf", "--arch", arch,
             "-o", tmp_path / f"cli-{arch}.json"])
        assert (tmp_path / f"py-{arch}.json").read_bytes() == (tmp_path / f"cli-{arch}.json").read_bytes()
        assert json.loads((tmp_path / f"py-{arch}.json").read_text())["max_window_layers"] == LAYOUT.num_layers
    # llama: transformers has no window for it.
    with pytest.raises(bosch.InvalidArgument, match="transformers would ignore.*Llama.*bosch.hf.*--to kvpress"):
        bosch.write_mask(tmp_path / "x.json", mask, LAYOUT, format="hf", window=16, arch="llama")
    # qwen3moe: every layer or none.
    with pytest.raises(bosch.InvalidArgument, match="qwen3moe.*2 of 6 layers"):
        bosch.write_mask(tmp_path / "x.json", mask, LAYOUT, format="hf", window=16, arch="qwen3moe")
    bosch.write_mask(tmp_path / "moe.json", np.ones(LAYOUT.shape, dtype=bool), LAYOUT, format="hf", window=16,
                     arch="qwen3moe")
    assert "max_window_layers" not in json.loads((tmp_path / "moe.json").read_text())
    assert not (tmp_path / "x.json").exists()
    # From the metadata, as bosch select records it; an arch= that contradicts it is refused.
    bosch.write_mask(tmp_path / "llama.json", mask, LAYOUT, metadata={"window": 16, "architecture": "llama"})
    f = bosch.read_mask(tmp_path / "llama.json")
    with pytest.raises(bosch.InvalidArgument, match="Llama"):
        bosch.write_mask(tmp_path / "x.json", f, format="hf")
    with pytest.raises(bosch.InvalidArgument, match="qwen2 differs from the llama") as e:
        bosch.write_mask(tmp_path / "x.json", f, format="hf", arch="qwen2")
    assert e.value.where == "arch"
    with pytest.raises(bosch.InvalidArgument, match="unknown architecture 'gemma2'"):
        bosch.write_mask(tmp_path / "x.json", mask, LAYOUT, format="hf", window=16, arch="gemma2")
    with pytest.raises(TypeError, match="arch"):
        bosch.write_mask(tmp_path / "x.json", mask, LAYOUT, format="hf", window=16, arch=2)
    # model= gives the model's architecture (stories260K: llama), which must agree with arch=.
    stories = bosch.HeadLayout(5, 8, 4)
    smask = layer_mask(stories, [0])
    with pytest.raises(bosch.InvalidArgument, match="transformers would ignore"):
        bosch.write_mask(tmp_path / "x.json", smask, stories, format="hf", window=16, model=stories_model)
    with pytest.raises(bosch.InvalidArgument, match="qwen2 differs from the model's, llama"):
        bosch.write_mask(tmp_path / "x.json", smask, stories, format="hf", window=16, model=stories_model,
                         arch="qwen2")
    assert not (tmp_path / "x.json").exists()
    # layers and kvpress take any architecture, and none.
    bosch.write_mask(tmp_path / "w.json", mask, LAYOUT, format="layers", window=16, max_seq_len=512)
    bosch.write_mask(tmp_path / "w2.json", mask, LAYOUT, format="layers", window=16, max_seq_len=512, arch="llama")
    bosch.write_mask(tmp_path / "pattern", mask, LAYOUT, format="kvpress", window=16)
