#!/usr/bin/env python3
"""A - B over several calibration draws, on the same held-out samples: the
mean over the draws of each draw's mean per-sample difference (log-prob and
greedy accuracy), with a 95% percentile bootstrap interval that resamples the
held-out samples within each draw and task (2000 resamples, seed 0). It is
conditional on these draws: how much a new draw varies shows in the per-draw
rows, not in this interval.

  python3 pooled.py LENGTH A B SEED...    e.g. pooled.py 1024 flips base 0 1 2 3
  (reads A-taskSEED-held-out-LENGTH.json and B-taskSEED-held-out-LENGTH.json)"""
import json
import random
import sys


def samples(path):
    return json.load(open(path))["held_out"]["samples"]


def main():
    length, a, b, seeds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    draws = []  # per draw: {task: [(dlogprob, daccuracy), ...]}
    for s in seeds:
        x, y = samples(f"{a}-task{s}-held-out-{length}.json"), samples(f"{b}-task{s}-held-out-{length}.json")
        if x["task"] != y["task"]:
            sys.exit(f"draw {s}: the two reports hold different samples")
        by_task = {}
        for i, t in enumerate(x["task"]):
            by_task.setdefault(t, []).append((x["logprob"][i] - y["logprob"][i], x["accuracy"][i] - y["accuracy"][i]))
        draws.append(by_task)

    def stat(ds):
        lp = [sum(d[0] for v in t.values() for d in v) / sum(len(v) for v in t.values()) for t in ds]
        ac = [sum(d[1] for v in t.values() for d in v) / sum(len(v) for v in t.values()) for t in ds]
        return sum(lp) / len(lp), sum(ac) / len(ac), lp, ac

    lp, ac, per_lp, per_ac = stat(draws)
    rng = random.Random(0)
    boot = []
    for _ in range(2000):
        boot.append(stat([{t: [rng.choice(v) for _ in v] for t, v in d.items()} for d in draws])[:2])
    def ci(k):
        v = sorted(r[k] for r in boot)
        return v[int(0.025 * len(v))], v[int(0.975 * len(v)) - 1]
    for s, l, c in zip(seeds, per_lp, per_ac):
        print(f"draw {s}: {a} - {b} log-prob {l:+.3f}, accuracy {c:+.3f}")
    (l0, l1), (c0, c1) = ci(0), ci(1)
    print(f"mean over {len(seeds)} draws at {length} tokens: log-prob {lp:+.3f} [{l0:+.3f}, {l1:+.3f}], "
          f"accuracy {ac:+.3f} [{c0:+.3f}, {c1:+.3f}]")


if __name__ == "__main__":
    main()
