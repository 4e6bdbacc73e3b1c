#!/usr/bin/env python3
"""The cross-data table of run.sh: each mask held out on both data sets, with
all-full and all-SWA, and the paired differences (from `bosch paired`)."""
import json
import os
import re

here = os.path.dirname(os.path.abspath(__file__))


def cell(t):
    lp = "%.3f [%.3f, %.3f]" % (t["mean_logprob"], *t["logprob_ci"])
    return lp, "%.3f" % t["accuracy"], ("%.3f" % t["match"]) if t.get("match") is not None else "-"


print("| held out on | mask | log-prob [95% CI] | accuracy | match |")
print("|---|---|---:|---:|---:|")
for d in ["code", "needles"]:
    rows = []
    for m in ["code", "needles"]:
        p = os.path.join(here, f"held-out-{d}-{m}.json")
        if not os.path.exists(p):
            continue
        j = json.load(open(p))
        rows.append((f"chosen on {m}", j["held_out"]["all"]))
        for name, r in j.get("references", {}).items():
            rows.append((name, r["all"]))
    for name, t in rows:
        print(f"| {d} | {name} | " + " | ".join(cell(t)) + " |")
print()
for d in ["code", "needles"]:
    p = os.path.join(here, f"paired-{d}.txt")
    if os.path.exists(p):
        for line in open(p):
            if line.strip().startswith("all "):
                m = re.search(r"([+-][0-9.]+) \[([+-][0-9.]+), ([+-][0-9.]+)\]", line)
                print(f"held out on {d}: code mask - needles mask, log-prob {m.group(1)} [{m.group(2)}, {m.group(3)}] nats")
