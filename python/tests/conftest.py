# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures of the Python package's tests.

The tests that compare with the C++ side run programs of a CMake build of the
repository (BOSCH_BUILD_DIR, default build/ as scripts/test makes it): the
`bosch` program and tests/python_reference's bosch_python_reference. Data
comes from ../shared/fixtures (BOSCH_FIXTURES_DIR). Outside CI a missing
program or fixture skips the test that needs it; under CI (the CI variable is
set) it fails, as the C++ suites do.
"""

import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("BOSCH_BUILD_DIR", ROOT / "build"))
FIXTURES = pathlib.Path(os.environ.get("BOSCH_FIXTURES_DIR", ROOT.parent / "shared" / "fixtures"))


def need(path: pathlib.Path, what: str) -> pathlib.Path:
    """`path` when it exists; else fail under CI and skip otherwise."""
    if path.exists():
        return path
    message = f"{what} missing: {path}"
    if os.environ.get("CI"):
        pytest.fail(message + " (under CI every program and fixture must be present)")
    pytest.skip(message)


@pytest.fixture(scope="session")
def bosch_cli() -> pathlib.Path:
    return need(BUILD / "apps" / "bosch", "the bosch program (scripts/test builds it)")


@pytest.fixture(scope="session")
def reference_program() -> pathlib.Path:
    return need(BUILD / "tests" / "python_reference" / "bosch_python_reference",
                "bosch_python_reference (scripts/test builds it)")


@pytest.fixture(scope="session")
def stories_model() -> pathlib.Path:
    return need(FIXTURES / "models" / "stories260K.gguf", "fixture model stories260K")


@pytest.fixture(scope="session")
def emma_text() -> pathlib.Path:
    return need(FIXTURES / "text" / "0_emma.txt", "fixture text")


def run(args, **kwargs) -> subprocess.CompletedProcess:
    """Runs a program; fails the test with its stderr when it exits non-zero."""
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kwargs)
    if p.returncode != 0:
        pytest.fail(f"{' '.join(map(str, args))} exited {p.returncode}:\n{p.stderr}")
    return p
