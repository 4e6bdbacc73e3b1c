#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""scripts/main-job-config: the settings file the main job runs with for the
ratios asked (the fast settings at rho <= 0.5, the full ones above, none
when the arguments bring their own --config), and both files exist and set
the options they are chosen for. Run by CTest (main_job_config)."""

import pathlib
import subprocess
import sys
import unittest

SOURCE = pathlib.Path(__file__).resolve().parents[2]
FAST, FULL = "scripts/main-job-fast.cfg", "scripts/main-job.cfg"


def choose(*args):
    out = subprocess.run([str(SOURCE / "scripts" / "main-job-config"), *args], cwd=SOURCE,
                         capture_output=True, text=True, check=True).stdout.split()
    if not out:
        return None
    assert out[0] == "--config" and len(out) == 2, out
    return out[1]


def settings(path):
    out = {}
    for line in (SOURCE / path).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            k, v = (s.strip() for s in line.split("=", 1))
            out[k] = v
    return out


class MainJobConfig(unittest.TestCase):
    def test_ratio_forms(self):
        self.assertEqual(choose(), FAST)  # the files' own ratio, 0.5
        for args in (["--ratio", "0.5"], ["--ratio=0.25"], ["-r", "0.5"], ["-r0.4"], ["--ratios", "0.25,0.5"],
                     ["--ratios=0.125,0.5"], ["--seed", "3", "-o", "m.json"]):
            self.assertEqual(choose(*args), FAST, args)
        for args in (["--ratio", "0.75"], ["--ratio=0.51"], ["-r", "0.875"], ["-r0.75"], ["--ratios", "0.25,0.5,0.75"],
                     ["--ratios=0.75"], ["-o", "m.json", "--ratio", "0.625", "--seed", "1"]):
            self.assertEqual(choose(*args), FULL, args)

    def test_own_config_wins(self):
        self.assertIsNone(choose("--ratio", "0.75", "--config", "mine.cfg"))
        self.assertIsNone(choose("--config=mine.cfg", "-r", "0.25"))

    def test_files(self):
        fast, full = settings(FAST), settings(FULL)
        self.assertEqual(fast["ratio"], "0.5")
        # The fast file is the full one with fewer calibration samples, a
        # cheaper Stage 1, smaller budgets and fewer proposals per generation
        # (the full file keeps bosch's default lambda of 4,
        # include/bosch/options.hpp).
        full.setdefault("lambda", "4")
        differ = {k for k in set(fast) | set(full) if fast.get(k) != full.get(k)}
        self.assertEqual(differ, {"samples", "probe-samples", "chunk-budget", "refine-budget", "lambda"})
        for k in differ:
            self.assertLess(int(fast[k]), int(full[k]), k)


if __name__ == "__main__":
    unittest.main(verbosity=2)
