# SPDX-License-Identifier: Apache-2.0
"""The Python examples and the overhead benchmark: they run (the Hugging Face
one only as far as it goes without torch: it imports; its attention is
bosch.hf, tested in test_hf.py)."""

import subprocess
import sys

import numpy as np

import bosch

from conftest import ROOT, run

EXAMPLES = ROOT / "examples" / "python"


def test_numpy_example_beats_the_baselines_and_writes_the_mask(tmp_path):
    out = tmp_path / "mask.json"
    p = run([sys.executable, EXAMPLES / "numpy_evaluator.py", "--layout", "30x9x3", "--ratio", "0.5", "-o", out])
    rows = {line[:22].strip(): float(line[22:]) for line in p.stdout.splitlines()[2:7]}
    assert set(rows) == {"BOSCH", "single-head ranking", "RAND (layers)", "BME (layers)", "INTR (layers)"}
    assert rows["BOSCH"] > max(v for k, v in rows.items() if k != "BOSCH")
    f = bosch.read_mask(out)
    assert f.layout == bosch.HeadLayout(30, 9, 3) and int(f.mask.sum()) == 45
    assert f.metadata["model"].startswith("planted") and f.metadata["seed"] == 0


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
