#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The PyTorch route (bosch.flex, bosch.hf, the hybrid KV cache) on a device,
for scripts/device-check: needs torch and transformers only (the bosch
package's C++ extension is not needed: the three pure-Python modules are
imported from python/bosch through a shim package when `bosch` is not
installed). Prints a Markdown section; exits 1 when a check fails.

1. bosch.flex.attention against dense masked SDPA on the device (fp32, and
   bf16 on a GPU), windows across tile edges, sinks, GQA, a decode offset.
2. A small random Llama on the device: greedy generation with the hybrid
   cache gives the tokens of the masked forward.
3. A Qwen2.5-Coder-0.5B-shaped model with random weights (bf16 on a GPU):
   one scoring forward at --tokens (default 32768) for all-full and a rho 0.5
   mask (window 1024, 4 sinks): seconds and peak device memory; then
   --decode tokens generated with the hybrid cache after that prompt: its
   bytes against a full cache's.

    python3 scripts/torch-device-check.py [--tokens 32768] [--decode 16] [--device cuda]
"""

import argparse
import importlib
import pathlib
import shutil
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def import_bosch_hf():
    try:
        return importlib.import_module("bosch.hf"), importlib.import_module("bosch.flex")
    except ImportError:
        shim = pathlib.Path(tempfile.mkdtemp()) / "bosch"
        shim.mkdir()
        (shim / "__init__.py").write_text("")
        for f in ("flex.py", "hf.py", "hybrid_cache.py"):
            shutil.copy(ROOT / "python" / "bosch" / f, shim / f)
        sys.modules.pop("bosch", None)
        sys.path.insert(0, str(shim.parent))
        return importlib.import_module("bosch.hf"), importlib.import_module("bosch.flex")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tokens", type=int, default=32768)
    p.add_argument("--decode", type=int, default=16)
    p.add_argument("--device", default=None)
    args = p.parse_args()
    import numpy as np
    import torch
    import transformers

    hf, flex = import_bosch_hf()
    dev = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    failures, lines = [], ["## The PyTorch route (scripts/torch-device-check.py)", ""]
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "CPU"
    lines.append(f"- device {dev} ({name}); torch {torch.__version__}, transformers {transformers.__version__}")

    # 1. attention against dense SDPA
    worst = {}
    g = torch.Generator(device="cpu").manual_seed(0)
    for dtype in ([torch.float32, torch.bfloat16] if dev.type == "cuda" else [torch.float32]):
        for hq, hkv, n, nq, w, s in [(8, 2, 1000, 1000, 128, 4), (6, 3, 777, 777, 1, 0), (8, 2, 3000, 1, 1024, 4),
                                     (4, 4, 300, 37, 100, 130)]:
            swa = (torch.rand(hkv, generator=g) < 0.5)
            swa[0] = True
            swa_q = swa.repeat_interleave(hq // hkv).to(dev)
            q, k, v = (torch.randn(sh, generator=g).to(dev, dtype) for sh in
                       ((1, hq, nq, 64), (1, hkv, n, 64), (1, hkv, n, 64)))
            out = flex.attention(q, k, v, swa_q, w, s)
            qp = torch.arange(n - nq, n, device=dev)
            kp = torch.arange(n, device=dev)
            allowed = ((kp[None] <= qp[:, None])
                       & (~swa_q[:, None, None] | (qp[:, None] - kp[None] < w) | (kp[None] < s)))
            grp = hq // hkv
            ref = torch.nn.functional.scaled_dot_product_attention(
                q.float(), k.float().repeat_interleave(grp, 1), v.float().repeat_interleave(grp, 1),
                attn_mask=allowed[None])
            err = (out.float() - ref).abs().max().item()
            worst[str(dtype)] = max(worst.get(str(dtype), 0.0), err)
    for dt, err in worst.items():
        tol = 2e-2 if "bfloat16" in dt else 1e-4
        ok = err <= tol
        lines.append(f"- flex attention vs dense SDPA, {dt}: max |diff| {err:.2e} (limit {tol:g}): "
                     f"{'pass' if ok else 'FAIL'}")
        if not ok:
            failures.append(f"flex attention {dt}")

    # 2. hybrid cache generation on a small random model
    attention = hf.WindowedAttention(7, 2, mask=np.array([[True, False], [False, True], [True, True]]))
    attention.register()
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=97, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
                                   num_attention_heads=4, num_key_value_heads=2, eos_token_id=None,
                                   attn_implementation=hf.ATTENTION_NAME)
    model = transformers.LlamaForCausalLM(cfg).to(dev).eval()
    with torch.no_grad():
        for prm in model.parameters():
            prm.mul_(8.0 if prm.dim() == 2 else 1.0)
        model.generation_config.eos_token_id = None
        prompt = torch.randint(0, 97, (1, 40), generator=g).to(dev)
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt), past_key_values=attention.new_cache(),
                             max_new_tokens=40, do_sample=False, pad_token_id=0)
        full = model(out).logits[0, 39:-1].argmax(-1)
    same = bool(torch.equal(full, out[0, 40:]))
    lines.append(f"- hybrid cache, greedy generation = masked forward (40 tokens, window 7, ring wraps): "
                 f"{'pass' if same else 'FAIL'}")
    if not same:
        failures.append("hybrid cache generation")

    # 3. a Qwen2.5-Coder-0.5B-shaped model at long context
    n = args.tokens
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    qcfg = transformers.Qwen2Config(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                                    num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
                                    rope_theta=1000000.0, tie_word_embeddings=True, eos_token_id=None,
                                    attn_implementation=hf.ATTENTION_NAME)
    big = hf.WindowedAttention(1024, 4, mask=np.zeros((24, 2), bool))
    big.register()
    torch.manual_seed(0)
    qmodel = transformers.Qwen2ForCausalLM(qcfg).to(dev, dtype).eval()
    qmodel.generation_config.eos_token_id = None
    ids = torch.randint(0, 151936, (1, n), generator=g).to(dev)
    rng = np.random.default_rng(0)
    half = np.zeros(48, bool)
    half[rng.choice(48, 24, replace=False)] = True
    lines += ["", f"Qwen2.5-Coder-0.5B shape, random weights, {dtype}, {n} tokens, window 1024, 4 sinks:", "",
              "| mask | scoring forward s | tokens/s | peak device MiB | hybrid cache bytes | full cache bytes | "
              f"decode {args.decode} tokens s |", "|---|---:|---:|---:|---:|---:|---:|"]
    with torch.no_grad():
        qmodel(ids[:, :512], logits_to_keep=1)  # compile, warm up
        for label, m in (("all-full", np.zeros((24, 2), bool)), ("rho 0.5", half.reshape(24, 2))):
            big.mask = m
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
                torch.cuda.reset_peak_memory_stats(dev)
            t = time.perf_counter()
            qmodel(ids, logits_to_keep=1)
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            secs = time.perf_counter() - t
            peak = torch.cuda.max_memory_allocated(dev) / 2**20 if dev.type == "cuda" else float("nan")
            cache = big.new_cache(capacity=n + args.decode)
            t = time.perf_counter()
            qmodel.generate(ids, attention_mask=torch.ones_like(ids), past_key_values=cache,
                            max_new_tokens=args.decode, do_sample=False, pad_token_id=0)
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            gen = time.perf_counter() - t
            full_bytes = 2 * 24 * 2 * 64 * (n + args.decode) * torch.empty((), dtype=dtype).element_size()
            lines.append(f"| {label} | {secs:.2f} | {n / secs:.0f} | {peak:.0f} | {cache.bytes()} | {full_bytes} | "
                         f"{gen:.2f} |")
    lines += ["", "PyTorch route: " + ("FAILED: " + ", ".join(failures) if failures else "passed")]
    print("\n".join(lines))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
