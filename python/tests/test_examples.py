# SPDX-License-Identifier: Apache-2.0
"""The Python examples and the overhead benchmark: they run (the Hugging Face
one only as far as it goes without torch: its mask builder, with NumPy)."""

import importlib.util
import subprocess
import sys

import numpy as np
import pytest

import bosch

from conftest import ROOT, run

EXAMPLES = ROOT / "examples" / "python"


def load(path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_numpy_example_beats_the_baselines_and_writes_the_mask(tmp_path):
    out = tmp_path / "mask.json"
    p = run([sys.executable, EXAMPLES / "numpy_evaluator.py", "--layout", "30x9x3", "--ratio", "0.5", "-o", out])
    rows = {line[:22].strip(): float(line[22:]) for line in p.stdout.splitlines()[2:7]}
    assert set(rows) == {"BOSCH", "single-head ranking", "RAND (layers)", "BME (layers)", "INTR (layers)"}
    assert rows["BOSCH"] > max(v for k, v in rows.items() if k != "BOSCH")
    f = bosch.read_mask(out)
    assert f.layout == bosch.HeadLayout(30, 9, 3) and int(f.mask.sum()) == 45
    assert f.metadata["model"].startswith("planted") and f.metadata["seed"] == 0


def brute_force(swa_kv, num_query_heads, q_positions, k_positions, window, sinks):
    group = num_query_heads // len(swa_kv)
    out = np.zeros((num_query_heads, len(q_positions), len(k_positions)), bool)
    for h in range(num_query_heads):
        for a, i in enumerate(q_positions):
            for b, j in enumerate(k_positions):
                if j > i:
                    continue
                out[h, a, b] = (not swa_kv[h // group]) or (i - window < j) or (j < sinks)
    return out


@pytest.mark.parametrize("kv, hq, q_len, k_len, window, sinks", [
    (4, 8, 12, 12, 3, 0),  # prefill
    (4, 8, 12, 12, 3, 2),  # with sinks
    (3, 9, 1, 17, 5, 1),   # one decoded token against a cache
    (2, 2, 5, 9, 1, 0),    # window 1: a local head sees only itself
    (2, 6, 7, 7, 10, 0),   # window wider than the sequence: local = full
])
def test_hf_example_window_mask_matches_the_windows_rule(kv, hq, q_len, k_len, window, sinks):
    hf = load(EXAMPLES / "hf_evaluator.py")
    rng = np.random.default_rng(kv * 100 + q_len)
    swa = rng.random(kv) < 0.5
    swa[0], swa[-1] = True, False
    k_pos = np.arange(k_len)
    q_pos = k_pos[k_len - q_len:]
    got = hf.window_mask(swa, hq, q_pos, k_pos, window, sinks)
    assert got.dtype == np.bool_ and got.shape == (hq, q_len, k_len)
    assert np.array_equal(got, brute_force(swa, hq, q_pos, k_pos, window, sinks))
    group = hq // kv
    assert got[:group].sum() <= got[-group:].sum()  # head 0 is local, the last is full


def test_hf_example_needs_no_torch_to_import():
    code = ("import sys, importlib.util; s = importlib.util.spec_from_file_location('hf', sys.argv[1]); "
            "m = importlib.util.module_from_spec(s); s.loader.exec_module(m); "
            "print('torch' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code, str(EXAMPLES / "hf_evaluator.py")], capture_output=True,
                       text=True, check=True)
    assert p.stdout.strip() == "False"


def test_overhead_benchmark_runs():
    p = run([sys.executable, ROOT / "bench" / "python_overhead.py", "--repeats", "1", "--layouts", "30x3",
             "--variants", "full"])
    row = p.stdout.splitlines()[-1].split()
    assert row[:2] == ["30x3", "full"] and int(row[2]) > 3
    times = [float(x) for x in row[3:]]
    assert times[0] > 0 and times[1] > 0 and not any(np.isnan(times))
