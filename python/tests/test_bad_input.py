# SPDX-License-Identifier: Apache-2.0
"""Bad paths through the Python package: the same mechanisms as the `bosch`
program (symbolic links written through, devices in place, directories
refused, no earlier checkpoint discarded silently), raised as bosch.FileError
(an OSError) or bosch.InvalidArgument (a ValueError) with the program's
messages, and no file replaced or left half-written."""

import os

import numpy as np
import pytest

import bosch

LAYOUT = bosch.HeadLayout(6, 8, 4)


def weights():
    return np.arange(24, dtype=float).reshape(6, 4) / 8.0


def planted(mask):
    return -float((weights() * mask).sum())


@pytest.fixture()
def mask():
    return bosch.layer_intr(LAYOUT, 0.5)


def test_write_mask_follows_a_symlink_and_keeps_it(tmp_path, mask):
    (tmp_path / "real").mkdir()
    link = tmp_path / "link.json"
    link.symlink_to("real/target.json")
    bosch.write_mask(link, mask, LAYOUT)
    assert link.is_symlink()
    assert np.array_equal(bosch.read_mask(tmp_path / "real" / "target.json").mask, mask)
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["target.json"]


def test_write_mask_to_a_device_writes_in_place(mask):
    bosch.write_mask("/dev/null", mask, LAYOUT, format="grid")
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")


def test_directories_are_refused_by_name(tmp_path, mask):
    d = tmp_path / "d.json"
    d.mkdir()
    with pytest.raises(bosch.FileError, match="is a directory") as e:
        bosch.read_mask(d)
    assert isinstance(e.value, OSError) and str(d) in str(e.value)
    with pytest.raises(bosch.FileError, match="is a directory"):
        bosch.write_mask(d, mask, LAYOUT)
    assert d.is_dir() and not any(d.iterdir())
    with pytest.raises(bosch.FileError, match="is a directory"):
        bosch.select(planted, LAYOUT, 0.5, checkpoint=d)


def test_an_earlier_checkpoint_is_never_discarded_silently(tmp_path):
    ck = tmp_path / "run.checkpoint"
    first = bosch.select(planted, LAYOUT, 0.5, checkpoint=ck, max_evaluations=30)
    before = ck.read_bytes()
    with pytest.raises(bosch.InvalidArgument, match="a checkpoint of an earlier run is there.*resume=True.*fresh=True"):
        bosch.select(planted, LAYOUT, 0.5, checkpoint=ck, max_evaluations=30)
    assert ck.read_bytes() == before
    with pytest.raises(bosch.InvalidArgument, match="exclude each other"):
        bosch.select(planted, LAYOUT, 0.5, checkpoint=ck, resume=True, fresh=True)
    again = bosch.select(planted, LAYOUT, 0.5, checkpoint=ck, max_evaluations=30, fresh=True)
    assert np.array_equal(again.mask, first.mask)
    resumed = bosch.select(planted, LAYOUT, 0.5, checkpoint=ck, max_evaluations=30, resume=True)
    assert np.array_equal(resumed.mask, first.mask) and resumed.evaluator_calls == 0


def test_a_checkpoint_in_a_missing_directory_fails_before_the_search(tmp_path):
    calls = []

    def evaluate(m):
        calls.append(1)
        return planted(m)

    with pytest.raises(bosch.FileError, match="does not exist"):
        bosch.select(evaluate, LAYOUT, 0.5, checkpoint=tmp_path / "no" / "run.checkpoint")
    assert not calls


def test_ratios_that_leave_nothing_to_choose_are_refused():
    with pytest.raises(bosch.InvalidArgument, match=r"gives 0 of 24 KV heads SWA.*0\.04167 \(1 head\)"):
        bosch.select(planted, LAYOUT, 1e-9)
    with pytest.raises(bosch.InvalidArgument, match="gives 24 of 24"):
        bosch.select(planted, LAYOUT, 0.99)


def test_select_outputs_never_name_an_input_or_each_other(tmp_path, stories_model, emma_text):
    # Before: select(..., checkpoint=the model) replaced the model with a checkpoint.
    log = tmp_path / "run.jsonl"
    with pytest.raises(bosch.InvalidArgument, match="log and checkpoint name the same file"):
        bosch.select(planted, LAYOUT, 0.5, checkpoint=log, log=tmp_path / "." / "run.jsonl")
    assert not log.exists()
    model = tmp_path / "model.gguf"
    model.write_bytes(open(stories_model, "rb").read())
    before = model.read_bytes()
    text = tmp_path / "emma.txt"
    text.write_bytes(open(emma_text, "rb").read())
    evaluator = bosch.TransformerEvaluator(str(model), text_files=[str(text)], tasks="copy", context=300,
                                           samples=2, window=32, allow_long_context=True, threads=1)
    (tmp_path / "alias.gguf").symlink_to("model.gguf")
    for kw in (dict(checkpoint=model), dict(log=tmp_path / "alias.gguf"), dict(checkpoint=model, fresh=True)):
        with pytest.raises(bosch.InvalidArgument, match="same file as the evaluator's model_path") as e:
            bosch.select(evaluator, ratio=0.5, max_evaluations=2, **kw)
        assert str(model) in str(e.value)
    with pytest.raises(bosch.InvalidArgument, match="the evaluator's text_files"):
        bosch.select(evaluator, ratio=0.5, max_evaluations=2, log=text)
    assert model.read_bytes() == before
    assert text.read_bytes() == open(emma_text, "rb").read()
    # bosch.write_mask: a result never over the files its search read, an
    # export never over the model it copies.
    result = bosch.select(evaluator, ratio=0.5, max_evaluations=3)
    for path in (model, tmp_path / "alias.gguf", text):
        with pytest.raises(bosch.InvalidArgument, match="an output never replaces an input"):
            bosch.write_mask(path, result)
    with pytest.raises(bosch.InvalidArgument, match="same file as model"):
        bosch.write_mask(tmp_path / "alias.gguf", result, format="gguf", model=model)
    assert model.read_bytes() == before
    assert text.read_bytes() == open(emma_text, "rb").read()
    bosch.write_mask(tmp_path / "mask.json", result)  # elsewhere it writes
    assert bosch.read_mask(tmp_path / "mask.json").mask.sum() == result.mask.sum()


def test_reads_never_block_and_a_full_disk_is_named(tmp_path, mask):
    fifo = tmp_path / "mask.json"
    os.mkfifo(fifo)
    # Before: read_mask blocked forever opening the FIFO.
    with pytest.raises(bosch.FileError, match="FIFO"):
        bosch.read_mask(fifo)
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate((64 << 20) + 1)
    with pytest.raises(bosch.FileError, match="64 MiB limit of a mask file"):
        bosch.read_mask(big)
    # Before: "write failed", without the reason.
    with pytest.raises(bosch.FileError, match="No space left on device"):
        bosch.write_mask("/dev/full", mask, LAYOUT, format="grid")


def test_a_failure_before_the_first_checkpoint_leaves_no_run_identity(tmp_path, stories_model, emma_text):
    class Boom:
        def begin_search(self, view):
            raise RuntimeError("boom before the first evaluation")

    evaluator = bosch.TransformerEvaluator(stories_model, text_files=[emma_text], tasks="copy", context=300,
                                           samples=2, window=32, allow_long_context=True, threads=1)
    ck = tmp_path / "run.checkpoint"
    with pytest.raises(RuntimeError, match="boom"):
        bosch.select(evaluator, ratio=0.5, max_evaluations=4, checkpoint=ck, callbacks=[Boom()])
    # Before: run.checkpoint.run.json stayed, without a checkpoint.
    assert sorted(p.name for p in tmp_path.iterdir()) == []
