# SPDX-License-Identifier: Apache-2.0
"""bosch.distributed: one raced search spread over 1, 2 and 3 processes
(torch.distributed, gloo, on the CPU) gives the same mask, scores and log,
each process scoring only its share of the samples; processes that run
different searches stop with a clear error instead of mixing scores."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="bosch.distributed needs torch (scripts/test-python installs it)")
pytest.importorskip("transformers")
from bosch.distributed import share  # noqa: E402

WORKER = Path(__file__).with_name("distributed_worker.py")


def launch(tmp_path, size, ratios):
    init = tmp_path / f"init-{size}-{'-'.join(map(str, ratios))}"
    out = tmp_path / f"result-{size}.json"
    env = dict(os.environ, OMP_NUM_THREADS="1", TQDM_DISABLE="1")
    procs = [subprocess.Popen([sys.executable, str(WORKER), str(r), str(size), str(init), str(out), str(ratios[r])],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for r in range(size)]
    done = [p.communicate(timeout=600) for p in procs]
    return [p.returncode for p in procs], [err for _, err in done], out


def test_share_splits_like_the_mpi_layer():
    assert [share(7, 3, i) for i in range(3)] == [(0, 3), (3, 5), (5, 7)]
    assert [share(2, 3, i) for i in range(3)] == [(0, 1), (1, 2), (2, 2)]


def test_a_search_over_one_two_and_three_processes_gives_the_same_mask_and_log(tmp_path):
    results = {}
    for size in (1, 2, 3):
        codes, errs, out = launch(tmp_path, size, [0.5] * size)
        assert codes == [0] * size, "\n".join(errs)
        results[size] = json.loads(out.read_text())
    one = results[1]
    assert one["eliminated"] > 0  # the race stopped candidates, so the test covers racing across processes
    assert one["forwards"] == one["own_forwards"]  # one process does all the work
    for size in (2, 3):
        r = results[size]
        assert (r["mask"], r["score"], r["eliminated"]) == (one["mask"], one["score"], one["eliminated"])
        assert r["log"] == one["log"]
        # rank 0 scored only its share; the group's cost counts every process
        assert r["own_forwards"] < r["forwards"]


def test_processes_that_run_different_searches_stop_with_an_error(tmp_path):
    codes, errs, _ = launch(tmp_path, 2, [0.5, 0.75])
    assert codes[0] != 0 and codes[1] != 0
    for err in errs:
        assert "asked for another mask or other samples" in err, err
