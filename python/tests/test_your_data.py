# SPDX-License-Identifier: Apache-2.0
"""Your own data in Python (docs/tasks.md §Your data): a JSONL file task, and
the same records passed as a list of dicts, score the same; bad records are
named by their index; the held-out report carries the file tasks' metrics."""

import json

import numpy as np
import pytest

import bosch

SETTINGS = dict(context=300, samples=2, held_out_samples=2, window=32, allow_long_context=True, threads=1)


@pytest.fixture(scope="module")
def records(emma_text):
    novel = emma_text.read_text(encoding="utf-8")
    out = []
    for i in range(8):
        at = 30000 + i * 6007
        end = novel.index(" ", at + 900)
        nxt = novel.index(" ", end + 1)
        out.append({"prompt": novel[at:end], "answer": novel[end + 1:nxt]})
    return out


def test_records_in_memory_score_as_their_file(stories_model, records, tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    from_file = bosch.TransformerEvaluator(stories_model, tasks=f"file:{path}", **SETTINGS)
    in_memory = bosch.TransformerEvaluator(stories_model, tasks=records, **SETTINGS)
    # The records' content names their cached file, so a second run is the same task.
    assert in_memory.settings["tasks"].startswith("file:")
    assert in_memory.settings["tasks"] == bosch.TransformerEvaluator(stories_model, tasks=[records], **SETTINGS).settings["tasks"]
    rng = np.random.default_rng(3)
    for _ in range(3):
        mask = rng.random((5, 4)) < 0.5
        assert in_memory.evaluate(mask) == from_file.evaluate(mask)
    report = in_memory.held_out(np.zeros((5, 4), dtype=bool))
    assert "match" in report["all"]  # the file tasks' normalized exact match
    assert 0 <= report["all"]["accuracy"] <= 1  # token F1


def test_records_mix_with_built_in_tasks(stories_model, emma_text, records):
    e = bosch.TransformerEvaluator(stories_model, tasks=["copy", records], text_files=[emma_text], **SETTINGS)
    names = e.settings["tasks"].split(",")
    assert names[0] == "copy" and names[1].startswith("file:")


def test_bad_records_are_named(stories_model, records, tmp_path):
    with pytest.raises(bosch.FormatError, match=r"tasks\[1\]: no field 'answer'"):
        bosch.TransformerEvaluator(stories_model, tasks=[records[0], {"prompt": "p"}], **SETTINGS)
    with pytest.raises(bosch.FormatError, match=r"field 'answer' is number"):
        bosch.TransformerEvaluator(stories_model, tasks=[{"prompt": "p", "answer": 4}], **SETTINGS)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(records[0]) + "\n{oops\n", encoding="utf-8")
    with pytest.raises(bosch.FormatError, match=r"bad.jsonl:2: not JSON"):
        bosch.TransformerEvaluator(stories_model, tasks=f"file:{bad}", **SETTINGS)
    with pytest.raises(bosch.InvalidArgument, match="file:PATH.jsonl"):
        bosch.TransformerEvaluator(stories_model, tasks=["needle"], **SETTINGS)
