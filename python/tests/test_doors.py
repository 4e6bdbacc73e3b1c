# SPDX-License-Identifier: Apache-2.0
"""One run, four doors: `bosch select`, the same command under mpirun (two
ranks), bosch.select(bosch.TransformerEvaluator(...)) and the same Python
under mpirun all run the one run function (bosch::select_heads), so the same
settings give the same mask file, evaluation log and metadata, byte for byte
once the wall-clock times (the fields that measure a run's own work) are set
aside."""

import json
import os
import pathlib
import re
import shutil
import sys

import pytest

import bosch

from conftest import BUILD, run

# A small search on stories260K (seconds), warm starts included so that the
# metadata's warm_start block is compared too.
SETTINGS = dict(tasks="copy", context=300, samples=2, window=32, sinks=2, allow_long_context=True, threads=1)
SEARCH = dict(ratio=0.5, seed=11, probe_budget=4, chunk_budget=8)
# What a run measures of its own work: wall time, and the forwards it computed
# (which depend on the processes' residual caches, not on the result).
MEASURED = {"seconds", "search_seconds", "forwards", "forward_tokens"}


def cli_args(model, text, out_dir):
    args = ["select", "--model", model, "--text-files", text, "-o", out_dir / "mask.json",
            "--log", out_dir / "log.jsonl", "--quiet"]
    for key, value in {**SETTINGS, **SEARCH}.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            args.append(flag)
        else:
            args += [flag, value]
    return args


def without_times(value):
    """`value` with every measured field set to 0 (nested dicts and lists)."""
    if isinstance(value, dict):
        return {k: 0 if k in MEASURED else without_times(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_times(v) for v in value]
    return value


def canonical(mask_file: pathlib.Path, log_file: pathlib.Path):
    """The mask file and the log as text, times zeroed, keys in file order."""
    mask = without_times(json.loads(mask_file.read_text()))
    log = [without_times(json.loads(line)) for line in log_file.read_text().splitlines()]
    return json.dumps(mask), "\n".join(json.dumps(r) for r in log)


def mpi_launcher():
    """mpirun of the build (CMakeCache), or a failure naming what is missing."""
    cache = BUILD / "CMakeCache.txt"
    text = cache.read_text() if cache.exists() else ""
    if not re.search(r"^BOSCH_WITH_MPI:BOOL=ON$", text, re.M):
        pytest.fail(f"the build in {BUILD} has no MPI (configure with -DBOSCH_WITH_MPI=ON, as .ci/run does)")
    m = re.search(r"^MPIEXEC_EXECUTABLE:FILEPATH=(.+)$", text, re.M)
    exe = m.group(1) if m else shutil.which("mpirun")
    if not exe or not os.path.exists(exe):
        pytest.fail("no MPI launcher (mpirun) found")
    return [exe, "-n", "2", "--oversubscribe"]


# bosch.select of a TransformerEvaluator in every process of an MPI job; rank
# 0 writes the files, every rank its mask bits (the same on every rank).
PY_MPI = """
import json, sys, bosch
model, text, out = sys.argv[1:4]
settings, search = json.loads(sys.argv[4]), json.loads(sys.argv[5])
assert bosch.mpi_size() == 2, bosch.mpi_size()
evaluator = bosch.TransformerEvaluator(model, text_files=[text], **settings)
rank = bosch.mpi_rank()
result = bosch.select(evaluator, **search, log=f"{out}/log.jsonl" if rank == 0 else None)
if rank == 0:
    bosch.write_mask(f"{out}/mask.json", result)
with open(f"{out}/bits-{rank}", "w") as f:
    f.write("".join("1" if b else "0" for b in result.mask.ravel()) + f" {result.score!r}")
"""


def test_cli_mpi_and_python_write_the_same_files(bosch_cli, stories_model, emma_text, tmp_path):
    cli_dir, mpi_dir, py_dir, py_mpi_dir = tmp_path / "cli", tmp_path / "mpi", tmp_path / "py", tmp_path / "py-mpi"
    for d in (cli_dir, mpi_dir, py_dir, py_mpi_dir):
        d.mkdir()
    run([bosch_cli, *cli_args(stories_model, emma_text, cli_dir)])
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")
    run([*mpi_launcher(), bosch_cli, *cli_args(stories_model, emma_text, mpi_dir)], env=env)
    run([*mpi_launcher(), sys.executable, "-c", PY_MPI, stories_model, emma_text, py_mpi_dir,
         json.dumps(SETTINGS), json.dumps(SEARCH)], env=env)

    evaluator = bosch.TransformerEvaluator(stories_model, text_files=[emma_text], **SETTINGS)
    result = bosch.select(evaluator, **SEARCH, log=py_dir / "log.jsonl")
    bosch.write_mask(py_dir / "mask.json", result)

    cli = canonical(cli_dir / "mask.json", cli_dir / "log.jsonl")
    assert json.loads(cli[0])["metadata"]["swa_heads"] == 10
    assert canonical(mpi_dir / "mask.json", mpi_dir / "log.jsonl") == cli
    assert canonical(py_dir / "mask.json", py_dir / "log.jsonl") == cli
    assert canonical(py_mpi_dir / "mask.json", py_mpi_dir / "log.jsonl") == cli
    assert (py_mpi_dir / "bits-0").read_text() == (py_mpi_dir / "bits-1").read_text()
    # The result in Python is the one in the files.
    assert evaluator.metadata(result) == json.loads((py_dir / "mask.json").read_text())["metadata"]


def test_python_resume_checks_the_run_identity(stories_model, emma_text, tmp_path):
    ck = tmp_path / "run.checkpoint"
    evaluator = bosch.TransformerEvaluator(stories_model, text_files=[emma_text], **SETTINGS)
    bosch.select(evaluator, ratio=0.5, seed=1, probe_budget=2, chunk_budget=2, max_evaluations=8, checkpoint=ck)
    identity = json.loads(pathlib.Path(str(ck) + ".run.json").read_text())
    assert identity["window"] == 32 and identity["sinks"] == 2 and identity["tasks"] == "copy"
    other = bosch.TransformerEvaluator(stories_model, text_files=[emma_text], **{**SETTINGS, "window": 16})
    with pytest.raises(bosch.InvalidArgument, match=r"resume: .*other settings \(window 32 -> 16\)"):
        bosch.select(other, ratio=0.5, seed=1, probe_budget=2, chunk_budget=2, max_evaluations=8, checkpoint=ck,
                     resume=True)
