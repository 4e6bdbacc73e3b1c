# SPDX-License-Identifier: Apache-2.0
"""The front page cannot rot: README.md stays within 150 lines, and its
examples run as shown. The C++ example and its CMake lines are built as a
consumer project against the build tree (find_package) and run; the CLI
command runs on the real SmolLM2 model with one change, a budget
(--max-evaluations 8), so that it takes seconds; the Python examples run as
shown, the Hugging Face one with the model id replaced by the local GGUF
file, the device by the CPU and 64 new tokens by 4."""

import re
import shlex
import subprocess
import sys

import pytest

from conftest import BUILD, CACHE, ROOT, need, run

README = ROOT / "README.md"
SMOLLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf"


def blocks(lang):
    """The fenced code blocks of README.md in language `lang`, in order."""
    text = README.read_text()
    return [m.group(1) for m in re.finditer(r"^```" + lang + r"\n(.*?)^```$", text, re.S | re.M)]


def test_the_front_page_is_short_and_starts_with_what_bosch_is_and_the_two_commands():
    lines = README.read_text().splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines (at most 150)"
    assert lines[0] == "# bosch"
    assert "attention heads" in " ".join(lines[1:6])
    first, second = blocks("sh")[:2]
    assert first.strip() == "scripts/select-heads --ratio 0.5"
    assert second.strip() == "scripts/test"
    for cmd in (first, second):
        assert (ROOT / cmd.split()[0]).is_file()


def test_the_cpp_example_builds_with_find_package_and_runs(tmp_path):
    (cpp,) = blocks("cpp")
    (cmake,) = blocks("cmake")
    config = need(BUILD / "boschConfig.cmake", "the build tree's package configuration (scripts/test builds it)")
    (tmp_path / "my_search.cpp").write_text(cpp)
    (tmp_path / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.20)\nproject(readme_example LANGUAGES CXX)\n"
        "set(CMAKE_CXX_STANDARD 20)\n" + cmake)
    build = tmp_path / "build"
    run(["cmake", "-S", tmp_path, "-B", build, f"-Dbosch_DIR={config.parent}", "-DCMAKE_BUILD_TYPE=Release"])
    run(["cmake", "--build", build, "-j2"])
    out = run([build / "my_search"]).stdout.splitlines()
    grid = out[:12]
    assert all(len(row) == 4 and set(row) <= {"S", "."} for row in grid), out
    assert sum(row.count("S") for row in grid) == 24  # exactly half of the 48 KV heads
    assert re.fullmatch(r"\d+ evaluations, score -?[0-9.]+", out[12]), out


def test_the_cli_example_runs_on_the_real_model(tmp_path, bosch_cli):
    model = need(CACHE / "models" / SMOLLM2, "SmolLM2 (scripts/fetch-model)")
    cli = [b for b in blocks("sh") if b.startswith("bosch select")][0]
    args = shlex.split(cli)
    assert args[:3] == ["bosch", "select", "-m"] and args[3] == SMOLLM2
    args = [str(bosch_cli), *args[1:3], str(model), *args[4:], "--max-evaluations", "8", "--samples", "1",
            "--held-out-samples", "1"]
    p = run(args, cwd=tmp_path)
    assert "SWA heads (S) per layer" in p.stderr
    assert re.search(r"^\s+mask\s+SWA samples\s+log-prob \[95% CI\]", p.stdout, re.M), p.stdout
    assert re.search(r"^\s+all-full\s+0\s", p.stdout, re.M) and re.search(r"^\s+all-SWA\s+90\s", p.stdout, re.M)
    import bosch

    f = bosch.read_mask(tmp_path / "mask.json")
    assert f.layout == bosch.HeadLayout(30, 9, 3) and int(f.mask.sum()) == 45
    assert f.metadata["window"] == 64


def test_the_your_data_example_runs_on_the_real_model(tmp_path, bosch_cli):
    model = need(CACHE / "models" / SMOLLM2, "SmolLM2 (scripts/fetch-model)")
    # The front page's main command with its inline `--tasks file:NAME` (the user's file).
    cli = [b for b in blocks("sh") if b.startswith("bosch select")][0]
    (data,) = re.findall(r"`--tasks file:(\S+)`", README.read_text())
    args = [a for a in shlex.split(cli) if a != "--report"] + ["--tasks", f"file:{data}"]
    # The user's file: a few records of each form.
    import json

    with open(tmp_path / data, "w") as f:
        for i in range(6):
            f.write(json.dumps({"prompt": f"Item {i}: the colour of box {i} is red. " * 20 + f"Box {i} is", "answer": "red"}) + "\n")
            f.write(json.dumps({"context": f"The key of room {i} is {100 + i}. " * 20,
                                "question": f"What is the key of room {i}?", "answer": str(100 + i)}) + "\n")
    args = [str(bosch_cli), *args[1:3], str(model), *args[4:], "--max-evaluations", "8", "--samples", "1", "-q"]
    run(args, cwd=tmp_path)
    import bosch

    f = bosch.read_mask(tmp_path / "mask.json")
    assert int(f.mask.sum()) == 45
    assert f.metadata["task_files"][0]["file"] == data and f.metadata["task_files"][0]["records"] == 12


def test_the_python_search_example_runs(tmp_path):
    first = blocks("python")[0]
    p = subprocess.run([sys.executable, "-c", first], capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 13 and all(len(r) == 4 and set(r) <= {"S", "."} for r in lines[:12]), lines
    assert sum(r.count("S") for r in lines[:12]) == 24
    assert re.fullmatch(r"\d+ evaluations, score -?[0-9.]+", lines[12]), lines


def test_the_hugging_face_example_generates_with_the_hybrid_cache(tmp_path, bosch_cli):
    pytest.importorskip("torch", reason="the PyTorch route needs torch (scripts/test-python installs it)")
    pytest.importorskip("transformers")
    pytest.importorskip("gguf", reason="transformers reads GGUF files through the gguf package")
    import numpy as np

    import bosch

    model = need(CACHE / "models" / SMOLLM2, "SmolLM2 (scripts/fetch-model)")
    mask = np.zeros((30, 3), bool)
    mask[::2] = True
    bosch.write_mask(tmp_path / "mask.json", mask, bosch.HeadLayout(30, 9, 3), metadata={"window": 64, "sinks": 4})
    code = blocks("python")[1]
    hub = '"HuggingFaceTB/SmolLM2-135M-Instruct", attention, device="cuda"'
    assert hub in code and "max_new_tokens=64" in code
    code = code.replace(hub, f'{str(model.parent)!r}, attention, gguf_file={SMOLLM2!r}, device="cpu"')
    code = code.replace("max_new_tokens=64", "max_new_tokens=4") + "\nprint(out.shape[1] - ids.shape[1])\n"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split()[-1] == "4"
