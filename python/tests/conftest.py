# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures of the Python package's tests.

The tests that compare with the C++ side run programs of a CMake build of the
repository (BOSCH_BUILD_DIR, default build/ as scripts/test makes it): the
`bosch` program and tests/python_reference's bosch_python_reference. Data
comes from tests/data and from the cache that scripts/fetch-test-data fills
(tests/data/README.md). A missing program or data file fails the test that
needs it, as in the C++ suites: nothing passes having asserted nothing.
"""

import os
import pathlib
import signal
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("BOSCH_BUILD_DIR", ROOT / "build"))
DATA = ROOT / "tests" / "data"
CACHE = pathlib.Path(os.environ.get("BOSCH_CACHE", pathlib.Path.home() / ".cache" / "bosch"))


def need(path: pathlib.Path, what: str) -> pathlib.Path:
    """`path` when it exists; else the test fails, naming what to run."""
    if path.exists():
        return path
    pytest.fail(f"{what} missing: {path} (scripts/test builds the programs; "
                "scripts/fetch-test-data fetches the data)")


@pytest.fixture(scope="session")
def bosch_cli() -> pathlib.Path:
    return need(BUILD / "apps" / "bosch", "the bosch program (scripts/test builds it)")


@pytest.fixture(scope="session")
def reference_program() -> pathlib.Path:
    return need(BUILD / "tests" / "python_reference" / "bosch_python_reference",
                "bosch_python_reference (scripts/test builds it)")


@pytest.fixture(scope="session")
def stories_model() -> pathlib.Path:
    return need(DATA / "models" / "stories260K.gguf", "test model stories260K")


@pytest.fixture(scope="session")
def emma_text() -> pathlib.Path:
    return need(CACHE / "text" / "emma.txt", "test text")


def run(args, **kwargs) -> subprocess.CompletedProcess:
    """Runs a program; fails the test with its stderr when it exits non-zero."""
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kwargs)
    if p.returncode != 0:
        pytest.fail(f"{' '.join(map(str, args))} exited {p.returncode}:\n{p.stderr}")
    return p


@pytest.fixture
def ctrl_c():
    """Python's own SIGINT handler (KeyboardInterrupt) for the test's duration.

    A process started in the background by a non-interactive shell (a CI job
    launched with `cmd &`) inherits SIGINT ignored, and Python then leaves it
    ignored, so a Ctrl-C test would see no KeyboardInterrupt for reasons that
    have nothing to do with bosch."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
