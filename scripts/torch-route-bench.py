#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Time and memory of the PyTorch route (docs/pytorch.md), on the CPU.

scoring: one scoring forward (the answer row's logits only) of a model at
  each context length, for all-full and a rho 0.5 mask (window --window,
  --sinks sinks): bosch.hf's block-sparse FlexAttention route ("flex"), the
  dense-mask route it replaces ("dense": SDPA with a (heads, q, k) boolean
  mask and keys repeated over the query heads) and bosch's C++ evaluator
  ("cpp", TransformerEvaluator in fp32). Each route runs in a process of
  its own; a route that dies (out of memory) or passes --budget seconds at a
  length is reported so, and not run at longer lengths.
cache: model.generate with --decode new tokens after a prompt of each
  length, with transformers' DynamicCache (every head keeps every position)
  and with the hybrid cache of bosch.hf at rho 0.5 and 0.75: the cache's
  bytes, the process's peak resident memory during the call, prefill and
  decode tokens/s, ratios to the DynamicCache in the same run.

Peak memory: the process's VmHWM after resetting it (/proc/self/clear_refs)
before each measured call, so each row's peak is its own. Run on an idle
machine; the tokens/s are wall-clock rates. Writes OUT/scoring.json,
OUT/cache.json and OUT/table.md (atomically), and prints the rows.

  scripts/torch-route-bench.py OUT [--what scoring,cache] [--contexts 2048,8192,16384]
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

MODELS = pathlib.Path(os.environ.get("BOSCH_CACHE", pathlib.Path.home() / ".cache" / "bosch")) / "models"
QWEN = MODELS / "Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf"
SMOL = MODELS / "SmolLM2-135M-Instruct.Q4_1.gguf"


def reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def peak_mib():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def rss_mib():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def masks(shape, rhos, seed=0):
    import numpy as np

    out = [("all-full", np.zeros(shape, bool))]
    rng = np.random.default_rng(seed)
    for rho in rhos:
        m = np.zeros(shape[0] * shape[1], bool)
        m[rng.choice(m.size, round(m.size * rho), replace=False)] = True
        out.append((f"rho {rho}", m.reshape(shape)))
    return out


def child_scoring(args):
    """One route at every length; prints a JSON line per (length, mask)."""
    import numpy as np
    import torch

    torch.set_num_threads(args.threads)
    contexts = [int(c) for c in args.contexts.split(",")]
    if args.route == "cpp":
        import bosch

        for n in contexts:
            e = bosch.TransformerEvaluator(str(args.model), context=n, precision="fp32", tasks="passkey", samples=1,
                                           window=args.window, sinks=args.sinks, threads=args.threads,
                                           allow_long_context=True)
            for label, m in masks((e.layout.num_layers, e.layout.num_kv_heads), [0.5]):
                reset_peak()
                t = time.perf_counter()
                e.evaluate(m)
                s = time.perf_counter() - t
                tokens = e.samples()[0]
                print(json.dumps({"route": "cpp", "context": n, "mask": label, "seconds": s,
                                  "tokens": len(tokens["prompt"]) + len(tokens["answer"]),
                                  "peak_mib": peak_mib()}), flush=True)
        return
    import bosch.hf

    attention = bosch.hf.WindowedAttention(args.window, args.sinks, backend=args.route)
    _, model = bosch.hf.load_model(str(args.model.parent), attention, gguf_file=args.model.name)
    cfg = model.config
    shape = (cfg.num_hidden_layers, cfg.num_key_value_heads)
    attention.mask = np.zeros(shape, bool)
    with torch.no_grad():
        for n in (300, 700):  # compile (dynamic shapes: a second length), warm up, every mask kind
            for _, m in masks(shape, [0.5]):
                attention.mask = m
                model(torch.randint(0, 1000, (1, n)), logits_to_keep=1)
        for n in contexts:
            ids = torch.randint(0, 1000, (1, n), generator=torch.Generator().manual_seed(n))
            for label, m in masks(shape, [0.5]):
                attention.mask = m
                reset_peak()
                t = time.perf_counter()
                model(ids, logits_to_keep=1)
                s = time.perf_counter() - t
                print(json.dumps({"route": args.route, "context": n, "mask": label, "seconds": s, "tokens": n,
                                  "peak_mib": peak_mib()}), flush=True)
                if s > args.budget:
                    print(json.dumps({"route": args.route, "stopped": f"over {args.budget} s at {n} tokens"}))
                    return


def child_cache(args):
    import numpy as np
    import torch
    import transformers

    import bosch.hf
    from bosch.hybrid_cache import dense_cache_bytes

    torch.set_num_threads(args.threads)
    attention = bosch.hf.WindowedAttention(args.window, args.sinks)
    _, model = bosch.hf.load_model(str(args.model.parent), attention, gguf_file=args.model.name)
    model.generation_config.eos_token_id = None
    cfg = model.config
    shape = (cfg.num_hidden_layers, cfg.num_key_value_heads)
    contexts = [int(c) for c in args.contexts.split(",")]
    with torch.no_grad():
        for n in (300, 700):  # compile for prefill and decode, both caches, every mask kind
            warm = torch.randint(0, 1000, (1, n))
            for label, m in [("DynamicCache", None)] + masks(shape, [0.5]):
                attention.mask = m if m is not None else np.zeros(shape, bool)
                cache = transformers.DynamicCache(config=cfg) if m is None else attention.new_cache()
                model.generate(warm, attention_mask=torch.ones_like(warm), max_new_tokens=3, do_sample=False,
                               past_key_values=cache)
        for n in contexts:
            ids = torch.randint(0, 1000, (1, n), generator=torch.Generator().manual_seed(n))
            for label, m in [("DynamicCache", None)] + masks(shape, [0.5, 0.75]):
                attention.mask = m if m is not None else np.zeros(shape, bool)
                # The hybrid cache allocated for the whole generation at once, as bosch generate does.
                cache = (transformers.DynamicCache(config=cfg) if m is None
                         else attention.new_cache(capacity=n + args.decode - 1))
                reset_peak()
                t = time.perf_counter()
                model(ids[:, :-1], past_key_values=cache, logits_to_keep=1)  # prefill
                t1 = time.perf_counter()
                model.generate(ids, attention_mask=torch.ones_like(ids), past_key_values=cache,
                               max_new_tokens=args.decode, do_sample=False)
                t2 = time.perf_counter()
                if m is None:
                    held = sum(l.keys.numel() * l.keys.element_size() * 2 for l in cache.layers)
                else:
                    held = cache.bytes()
                print(json.dumps({"context": n, "mask": label, "kv_bytes": held,
                                  "dense_bytes": dense_cache_bytes(cfg, 1, n + args.decode - 1, torch.float32),
                                  "prefill_tok_s": (n - 1) / (t1 - t), "decode_tok_s": args.decode / (t2 - t1),
                                  "peak_mib": peak_mib(), "rss_mib": rss_mib()}), flush=True)


def run_child(what, route, args, out_rows):
    cmd = [sys.executable, __file__, str(args.out), "--child", what, "--route", route or "", "--model",
           str(args.model if what == "scoring" else args.cache_model), "--contexts",
           args.contexts if what == "scoring" else args.cache_contexts, "--window",
           str(args.window if what == "scoring" else args.cache_window), "--sinks", str(args.sinks),
           "--threads", str(args.threads), "--budget", str(args.budget), "--decode", str(args.decode)]
    env = dict(os.environ, TQDM_DISABLE="1", HF_HUB_OFFLINE="1")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    for line in p.stdout:
        if line.startswith("{"):
            row = json.loads(line)
            out_rows.append(row)
            print(what, row, flush=True)
    p.wait()
    if p.returncode != 0:
        died = {"route": route, "died": f"exit {p.returncode}" + (" (killed: out of memory?)" if p.returncode < 0 else "")}
        out_rows.append(died)
        print(what, died, flush=True)


def write_atomic(path, text):
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def table(scoring, cache, args):
    lines = []
    if scoring:
        lines += [f"## Scoring forward: {args.model.name}, window {args.window}, {args.sinks} sinks, "
                  f"{args.threads} threads", "",
                  "| route | context | mask | seconds | tokens/s | peak RSS MiB | / flex same row |",
                  "|---|---:|---|---:|---:|---:|---:|"]
        flex = {(r["context"], r["mask"]): r["seconds"] for r in scoring if r.get("route") == "flex" and "seconds" in r}
        for r in scoring:
            if "seconds" in r:
                rel = flex.get((r["context"], r["mask"]))
                lines.append(f"| {r['route']} | {r['context']} | {r['mask']} | {r['seconds']:.1f} | "
                             f"{r['tokens'] / r['seconds']:.0f} | {r['peak_mib']:.0f} | "
                             f"{'%.2f' % (r['seconds'] / rel) if rel else '-'} |")
            else:
                lines.append(f"| {r['route']} | | {r.get('stopped') or r.get('died')} | | | | |")
        lines.append("")
    if cache:
        lines += [f"## Generation with a cache: {args.cache_model.name}, window {args.cache_window}, "
                  f"{args.sinks} sinks, {args.decode} new tokens, {args.threads} threads", "",
                  "| context | cache | KV bytes | / DynamicCache | peak RSS MiB | prefill tok/s | decode tok/s | "
                  "decode / DynamicCache |", "|---:|---|---:|---:|---:|---:|---:|---:|"]
        base = {r["context"]: r for r in cache if r.get("mask") == "DynamicCache"}
        for r in cache:
            if "kv_bytes" not in r:
                lines.append(f"| | {r.get('died')} | | | | | | |")
                continue
            b = base.get(r["context"])
            lines.append(f"| {r['context']} | {r['mask']} | {r['kv_bytes']} | "
                         f"{r['kv_bytes'] / b['kv_bytes']:.3f} | {r['peak_mib']:.0f} | {r['prefill_tok_s']:.0f} | "
                         f"{r['decode_tok_s']:.2f} | {r['decode_tok_s'] / b['decode_tok_s']:.2f} |")
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", type=pathlib.Path)
    p.add_argument("--what", default="scoring,cache")
    p.add_argument("--routes", default="flex,cpp,dense")
    p.add_argument("--model", type=pathlib.Path, default=QWEN, help="scoring: the GGUF file")
    p.add_argument("--contexts", default="2048,8192,16384")
    p.add_argument("--window", type=int, default=1024)
    p.add_argument("--cache-model", type=pathlib.Path, default=SMOL)
    p.add_argument("--cache-contexts", default="2048,8192,16384")
    p.add_argument("--cache-window", type=int, default=64)
    p.add_argument("--sinks", type=int, default=4)
    p.add_argument("--decode", type=int, default=16)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--budget", type=float, default=600, help="seconds after which a route stops lengthening")
    p.add_argument("--child", choices=["scoring", "cache"])
    p.add_argument("--route", default="")
    args = p.parse_args()
    if args.child == "scoring":
        return child_scoring(args)
    if args.child == "cache":
        return child_cache(args)
    args.out.mkdir(parents=True, exist_ok=True)
    what = args.what.split(",")
    scoring, cache = [], []
    if "scoring" in what:
        for route in args.routes.split(","):
            run_child("scoring", route, args, scoring)
            write_atomic(args.out / "scoring.json", json.dumps(scoring, indent=1) + "\n")
    if "cache" in what:
        run_child("cache", "", args, cache)
        write_atomic(args.out / "cache.json", json.dumps(cache, indent=1) + "\n")
    if not scoring and (args.out / "scoring.json").exists():
        scoring = json.loads((args.out / "scoring.json").read_text())
    if not cache and (args.out / "cache.json").exists():
        cache = json.loads((args.out / "cache.json").read_text())
    write_atomic(args.out / "table.md", table(scoring, cache, args))
    print(table(scoring, cache, args))


if __name__ == "__main__":
    sys.exit(main())
