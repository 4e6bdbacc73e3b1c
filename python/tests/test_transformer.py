# SPDX-License-Identifier: Apache-2.0
"""bosch.TransformerEvaluator on the tiny real model (stories260K): the same
scores, search, metadata and held-out report as the `bosch` program, the GIL
released during the search, and Ctrl-C between native evaluations."""

import json
import os
import signal
import threading
import time

import numpy as np
import pytest

import bosch

from conftest import run

# The small search of the C++ CLI tests (tests/cli/cli_support.hpp), one thread.
TASKS = dict(tasks="copy", context=300, samples=2, window=32, allow_long_context=True)
SEARCH = dict(seed=7, probe_budget=4, chunk_budget=8)


def cli_args(model, text):
    return ["--model", model, "--tasks", "copy", "--text-files", text, "--context", 300, "--samples", 2,
            "--window", 32, "--threads", 1, "--allow-long-context"]


@pytest.fixture(scope="module")
def evaluator(stories_model, emma_text):
    return bosch.TransformerEvaluator(stories_model, text_files=[emma_text], threads=1, **TASKS)


@pytest.fixture(scope="module")
def cli_select(bosch_cli, stories_model, emma_text, tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    run([bosch_cli, "select", *cli_args(stories_model, emma_text), "--ratio", 0.5, "--probe-budget", 4,
         "--chunk-budget", 8, "--seed", 7, "-o", d / "mask.json", "--log", d / "log.jsonl", "--quiet"])
    log = [json.loads(line) for line in (d / "log.jsonl").read_text().splitlines()]
    return d / "mask.json", log


def bits(mask):
    return "".join("1" if b else "0" for b in np.asarray(mask).ravel())


def test_layout_and_settings(evaluator):
    assert evaluator.layout == bosch.HeadLayout(5, 8, 4)
    assert (evaluator.window, evaluator.sinks, evaluator.device) == (32, 0, "cpu")
    assert evaluator.calibration_samples == 2
    assert evaluator.suite["tasks"] == "copy" and evaluator.suite["context"] == 300


def test_deploy_context_calibrates_at_the_recipes_lengths(stories_model, emma_text):
    tasks = {k: v for k, v in TASKS.items() if k != "context"}
    ev = bosch.TransformerEvaluator(stories_model, text_files=[emma_text], threads=1, deploy_context=600, **tasks)
    assert ev.suite["context"] == [256, 512]  # as `bosch select --deploy-context 600 --window 32`
    with pytest.raises(ValueError, match="deploy_context.*not both"):
        bosch.TransformerEvaluator(stories_model, text_files=[emma_text], deploy_context=600, **TASKS)


def test_stratified_depths_keyword(stories_model, emma_text, evaluator):
    ev = bosch.TransformerEvaluator(stories_model, text_files=[emma_text], threads=1, stratified_depths=True, **TASKS)
    assert ev.suite["stratified_depths"] is True
    assert "stratified_depths" not in evaluator.suite  # off by default, and then not recorded
    full = np.zeros((5, 4), dtype=bool)
    assert ev.evaluate(full) != evaluator.evaluate(full)  # other needle depths, other samples


def test_scores_equal_the_bosch_program_bitwise(evaluator, cli_select):
    _, log = cli_select
    for record in log[:4]:
        mask = np.array([c == "1" for c in record["mask"]]).reshape(5, 4)
        assert evaluator.evaluate(mask) == record["score"]
        assert evaluator(mask) == record["score"]
    masks = np.stack([np.array([c == "1" for c in r["mask"]]).reshape(5, 4) for r in log[4:7]])
    assert evaluator.evaluate_batch(masks).tolist() == [r["score"] for r in log[4:7]]


def test_select_equals_bosch_select_and_releases_the_gil(stories_model, emma_text, cli_select):
    # A fresh evaluator, as `bosch select` has: the module's one has already
    # computed its samples' shared prefixes, which a search on it does not pay
    # again, so its forwards would be lower by those passes.
    evaluator = bosch.TransformerEvaluator(stories_model, text_files=[emma_text], threads=1, **TASKS)
    mask_file, log = cli_select
    counter = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            counter[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        time.sleep(0.01)
        before = counter[0]
        r = bosch.select(evaluator, ratio=0.5, **SEARCH)
        during = counter[0] - before
    finally:
        stop.set()
        t.join()
    assert [(e.index, e.stage, bits(e.mask), e.score) for e in r.log] == \
           [(e["index"], e["stage"], e["mask"], e["score"]) for e in log]
    cli = bosch.read_mask(mask_file)
    assert np.array_equal(r.mask, cli.mask)
    # The metadata `bosch select` writes, field for field (the search time aside).
    meta = evaluator.metadata(r)
    assert meta.keys() == cli.metadata.keys()
    for key in meta.keys() - {"search_seconds"}:
        assert meta[key] == cli.metadata[key], key
    # A Python thread ran while the C++ search did (the GIL was released).
    assert during > 10000, during


def test_held_out_report_equals_bosch_evaluate(evaluator, bosch_cli, stories_model, emma_text, cli_select):
    mask_file, _ = cli_select
    p = run([bosch_cli, "evaluate", *cli_args(stories_model, emma_text), "--mask", mask_file, "--json", "--quiet"])
    cli = json.loads(p.stdout)["held_out"]
    assert evaluator.held_out(bosch.read_mask(mask_file).mask) == cli


def test_ctrl_c_between_native_evaluations_stops_with_a_checkpoint(evaluator, tmp_path, ctrl_c):
    ck = tmp_path / "run.checkpoint"
    search = dict(ratio=0.5, seed=3, probe_budget=6, chunk_budget=24, group_rounds=2)
    timer = threading.Timer(0.4, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt) as e:
            bosch.select(evaluator, checkpoint=ck, **search)
    finally:
        timer.cancel()
    partial = e.value.bosch_result  # set only when the search stopped cleanly between evaluations
    assert partial.stopped and 2 < partial.evaluations
    assert len(json.loads(ck.read_text())["evaluations"]) == partial.evaluations
    resumed = bosch.select(evaluator, checkpoint=ck, resume=True, **search)
    assert resumed.replayed == partial.evaluations and not resumed.stopped
    full = bosch.select(evaluator, **search)
    assert resumed.evaluations > partial.evaluations
    assert [(bits(a.mask), a.score) for a in resumed.log] == [(bits(b.mask), b.score) for b in full.log]


def test_bad_settings_name_the_setting(stories_model, emma_text, tmp_path):
    with pytest.raises(bosch.InvalidArgument, match="window"):
        bosch.TransformerEvaluator(stories_model, text_files=[emma_text], window=0)
    with pytest.raises(bosch.InvalidArgument, match="tasks"):
        bosch.TransformerEvaluator(stories_model, tasks="nope")
    with pytest.raises(bosch.InvalidArgument, match="device"):
        bosch.TransformerEvaluator(stories_model, text_files=[emma_text], device="tpu")
    # Text files: missing (whatever the tasks), a directory, not UTF-8 text.
    with pytest.raises(bosch.FileError, match="nope.txt: no such file"):
        bosch.TransformerEvaluator(stories_model, tasks="passkey", text_files=[tmp_path / "nope.txt"])
    with pytest.raises(bosch.FileError, match="is a directory"):
        bosch.TransformerEvaluator(stories_model, text_files=[tmp_path])
    (tmp_path / "bin.txt").write_bytes(b"Text first.\n\xff rest")
    with pytest.raises(bosch.FormatError, match="not UTF-8 text.*byte offset 12"):
        bosch.TransformerEvaluator(stories_model, text_files=[tmp_path / "bin.txt"], **TASKS)
    (tmp_path / "x.gguf").write_bytes(b"GGUF")
    with pytest.raises(bosch.Error, match="x.gguf"):
        bosch.TransformerEvaluator(tmp_path / "x.gguf", text_files=[emma_text])
    e = bosch.TransformerEvaluator(stories_model, text_files=[emma_text], threads=1, **TASKS)
    with pytest.raises(bosch.InvalidArgument, match="shape"):
        e.evaluate(np.zeros((4, 4), bool))
    with pytest.raises(bosch.InvalidArgument, match="differs from the model"):
        bosch.select(e, "6x8x4", 0.5)
