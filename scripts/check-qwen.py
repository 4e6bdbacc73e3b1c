#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Is the second model what it claims? (issue 23 item 1), run by scripts/check-qwen.

Checks Qwen2.5-Coder-0.5B-Instruct (scripts/fetch-model --model
qwen2.5-coder-0.5b) against implementations that share no code with bosch:

1. Header and tensors, read with the `gguf` package: architecture qwen2, 24
   layers, hidden 896, FFN 4864, 14 query and 2 KV heads of 64, RoPE theta
   1e6, trained context 32768, file type Q4_K_M, every tensor of every layer
   with its shape, and the untied output matrix equal to the embedding up to
   quantization (Qwen2.5-0.5B ties them); `bosch inspect --json` must agree.
2. Tokens: a Hugging Face `tokenizers` BPE built from the file's vocabulary and
   merges with Qwen2's pre-tokenizer (tokenizer.json's Split regex, NFC,
   ByteLevel) encodes --text (default: the first --tokens tokens of
   scripts/fetch-parts.py, Python code).
3. Logits: a naive NumPy forward in float64 (RMSNorm, Q/K/V biases, neox RoPE
   with the file's theta, grouped-query attention, SwiGLU, untied output) on
   the weights as dequantized by gguf's own dequantizer, against `bosch
   logits` (fp32), for all-full attention and for a seeded random per-KV-head
   mask with --window, without and with --sinks. Reports the max |logit
   difference|, the max |log-prob difference| and the agreement of the argmax,
   next to how far the mask moves the logits (so that a match is not a
   mask that was ignored on both sides).
4. Greedy output: `bosch generate --prompt 'def fibonacci(n):'` against the
   reference's own greedy decoding (KV cache, full attention).
Exits 1 when a check fails; prints the figures.
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
import unicodedata

import gguf
import numpy as np
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

# Qwen2's tokenizer.json pre-tokenizer (Split, isolated), then ByteLevel.
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
EXPECTED = {"architecture": "qwen2", "layers": 24, "hidden_size": 896, "intermediate_size": 4864,
            "query_heads": 14, "kv_heads": 2, "head_dim": 64, "context_length": 32768,
            "rope_theta": 1e6, "vocab_size": 151936}


def field(reader, key):
    f = reader.fields.get(key)
    return None if f is None else f.contents()


def hf_tokenizer(reader, parse_special=True):
    """The file's BPE as a Hugging Face tokenizer (independent of bosch).
    Without parse_special, control tokens written in the text are plain text
    (bosch's and llama.cpp's encode(parse_special=false)); user-defined tokens
    are matched either way."""
    tokens = field(reader, "tokenizer.ggml.tokens")
    types = field(reader, "tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ", 1)) for m in field(reader, "tokenizer.ggml.merges")]
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab, merges, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    # Control (3) and user-defined (4) tokens are matched before BPE, as the
    # added tokens of the model's tokenizer.json are.
    kinds = (3, 4) if parse_special else (4,)
    tok.add_tokens([AddedToken(tokens[i], special=types[i] == 3, normalized=False)
                    for i in range(len(tokens)) if types[i] in kinds])
    return tok


class Reference:
    """Qwen2 forward in float64 with plain NumPy on gguf-dequantized weights."""

    def __init__(self, reader):
        self.L = field(reader, "qwen2.block_count")
        self.H = field(reader, "qwen2.attention.head_count")
        self.G = field(reader, "qwen2.attention.head_count_kv")
        self.D = field(reader, "qwen2.embedding_length") // self.H
        self.theta = float(field(reader, "qwen2.rope.freq_base"))
        self.eps = float(field(reader, "qwen2.attention.layer_norm_rms_epsilon"))
        t = {x.name: x for x in reader.tensors}
        deq = lambda n: np.asarray(gguf.quants.dequantize(t[n].data, t[n].tensor_type), dtype=np.float32)
        self.embd = deq("token_embd.weight")
        self.out = deq("output.weight") if "output.weight" in t else self.embd
        self.out_norm = deq("output_norm.weight").astype(np.float64)
        names = ["attn_norm.weight", "attn_q.weight", "attn_q.bias", "attn_k.weight", "attn_k.bias",
                 "attn_v.weight", "attn_v.bias", "attn_output.weight", "ffn_norm.weight", "ffn_gate.weight",
                 "ffn_up.weight", "ffn_down.weight"]
        self.layers = [{n: deq(f"blk.{l}.{n}") for n in names} for l in range(self.L)]

    def rms(self, x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + self.eps) * w.astype(np.float64)

    def rope(self, x, pos):
        """neox RoPE on x [T, heads, D]: dimension i pairs with i + D/2."""
        half = self.D // 2
        inv = self.theta ** (-np.arange(half, dtype=np.float64) * 2.0 / self.D)
        ang = pos[:, None].astype(np.float64) * inv[None, :]
        cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        a, b = x[..., :half], x[..., half:]
        return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)

    def forward(self, ids, start=0, cache=None, swa=None, window=0, sinks=0):
        """Logits [T, vocab] (float64) of tokens `ids` at positions start..;
        `cache` (list per layer of [K, V], RoPE'd, extended in place) holds the
        earlier positions. swa[l, g] True: KV head g of layer l sees keys
        i - window < j <= i and j < sinks."""
        ids = np.asarray(ids)
        T = len(ids)
        pos = np.arange(start, start + T)
        x = self.embd[ids].astype(np.float64)
        lin = lambda h, w: h @ w.astype(np.float64).T
        for l, W in enumerate(self.layers):
            h = self.rms(x, W["attn_norm.weight"])
            q = (lin(h, W["attn_q.weight"]) + W["attn_q.bias"]).reshape(T, self.H, self.D)
            k = (lin(h, W["attn_k.weight"]) + W["attn_k.bias"]).reshape(T, self.G, self.D)
            v = (lin(h, W["attn_v.weight"]) + W["attn_v.bias"]).reshape(T, self.G, self.D)
            q, k = self.rope(q, pos), self.rope(k, pos)
            if cache is not None:
                if len(cache) <= l:
                    cache.append([k[:0], v[:0]])
                cache[l][0] = k = np.concatenate([cache[l][0], k])
                cache[l][1] = v = np.concatenate([cache[l][1], v])
            keys = np.arange(k.shape[0])
            causal = keys[None, :] <= pos[:, None]
            o = np.empty((T, self.H, self.D))
            for hq in range(self.H):
                g = hq // (self.H // self.G)  # grouped-query attention
                vis = causal
                if swa is not None and swa[l, g]:
                    vis = causal & ((keys[None, :] > pos[:, None] - window) | (keys[None, :] < sinks))
                s = q[:, hq, :] @ k[:, g, :].T / np.sqrt(self.D)
                s = np.where(vis, s, -np.inf)
                p = np.exp(s - s.max(-1, keepdims=True))
                o[:, hq, :] = (p / p.sum(-1, keepdims=True)) @ v[:, g, :]
            x = x + lin(o.reshape(T, -1), W["attn_output.weight"])
            h = self.rms(x, W["ffn_norm.weight"])
            gate, up = lin(h, W["ffn_gate.weight"]), lin(h, W["ffn_up.weight"])
            x = x + lin(gate / (1 + np.exp(-gate)) * up, W["ffn_down.weight"])
        h = self.rms(x, self.out_norm)
        step = 16384
        return np.concatenate([lin(h, self.out[i:i + step]) for i in range(0, self.out.shape[0], step)], axis=1)


# Texts of tests/model/tokenizer_real_models_test.cpp's Qwen2.5-Coder case
# (--vectors prints their ids as C++); every one is NFC, so that the NFC
# normalizer of Qwen's tokenizer.json (which llama.cpp and bosch do not apply)
# makes no difference.
VECTOR_TEXTS = [
    "def fibonacci(n):",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
    "#include <vector>\nint main() {\n\tstd::vector<int> v{1, 2, 3};\n"
    "\treturn static_cast<int>(v.size());  // 3\n}\n",
    "Hello world",
    " Hello world",
    "Hello, world! 12345 3.14",
    "0x1F + 1_000_000 == 1e-9",
    "  two  spaces\tand tabs\n\nnewlines",
    "\n\n\n   \n  x  \n ",
    "I'M sure it's DON'T they'LL we've",
    "\u00e9migr\u00e9 na\u00efve caf\u00e9 \u2014 \u201cquotes\u201d \U0001f999 \u65e5\u672c\u8a9e",
    "It is a truth universally acknowledged, that a single man in possession of a good fortune, "
    "must be in want of a wife.",
    "<|im_start|>user\nHi<|im_end|>",
    "<tool_call>{}</tool_call>",
    "x",
]
# Parsed with parse_special (control tokens in the text are tokens).
VECTOR_TEXTS_SPECIAL = [
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWrite fib<|im_end|>\n"
    "<|im_start|>assistant\n",
    "<|fim_prefix|>def f(x):\n<|fim_suffix|>\n    return y<|fim_middle|>",
]
# Tensors whose first row bosch's dequantizer must reproduce (one per type).
VECTOR_TENSORS = ["blk.0.attn_q.weight", "blk.0.attn_v.weight", "blk.0.ffn_down.weight", "blk.23.ffn_down.weight",
                  "token_embd.weight", "output.weight"]


def cpp_string(text):
    """A C++ string literal of text's UTF-8 bytes."""
    out, hex_before = [], False
    for b in text.encode():
        c = chr(b)
        if hex_before and c in "0123456789abcdefABCDEF":
            out.append('" "')
        hex_before = False
        if c == "\\" or c == '"':
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif 32 <= b < 127:
            out.append(c)
        else:
            out.append(f"\\x{b:02X}")
            hex_before = True
    return '"' + "".join(out) + '"'


def print_vectors(reader):
    """The expected ids and dequantized values of the C++ tests, from
    tokenizers and gguf (so that the tests compare bosch with them)."""
    for title, texts, tok in (("plain", VECTOR_TEXTS, hf_tokenizer(reader, parse_special=False)),
                              ("parse_special", VECTOR_TEXTS_SPECIAL, hf_tokenizer(reader, parse_special=True))):
        print(f"// {title}")
        for text in texts:
            assert unicodedata.is_normalized("NFC", text)
            ids = tok.encode(text, add_special_tokens=False).ids
            print(f"{{{cpp_string(text)},\n {{{', '.join(map(str, ids))}}}}},")
    # Long texts: the token count and FNV-1a 64 of the ids (4 bytes each, little-endian).
    texts = pathlib.Path(os.environ.get("BOSCH_CACHE", pathlib.Path.home() / ".cache" / "bosch")) / "text"
    plain = hf_tokenizer(reader, parse_special=False)
    for name, size in (("emma.txt", 20000), ("prideprejudice.txt", 100 * 1024)):
        text = (texts / name).read_bytes()[:size].decode()
        ids = plain.encode(text, add_special_tokens=False).ids
        h = 0xCBF29CE484222325
        for b in np.asarray(ids, dtype="<u4").tobytes():
            h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
        print(f'{{"text/{name}", {size}, {len(ids)}, 0x{h:016x}ull}},')
    t = {x.name: x for x in reader.tensors}
    for name in VECTOR_TENSORS:
        x = t[name]
        row = np.asarray(gguf.quants.dequantize(x.data[:1], x.tensor_type), dtype=np.float32)[0]
        first = ", ".join(f"{float(v)!r}f" for v in row[:4])
        print(f'{{"{name}", "{x.tensor_type.name}", {row.size}, {{{first}}}, {float(row.astype(np.float64).sum())!r}, '
              f'{float(np.abs(row.astype(np.float64)).max())!r}}},')


def bosch_logits(cli, model, ids, extra):
    """`bosch logits`' rows as float32 [T, vocab], read line by line."""
    proc = subprocess.Popen([str(cli), "logits", str(model), *map(str, ids), "--quiet", *extra],
                            stdout=subprocess.PIPE, text=True)
    rows = [np.array(line.split()[1:], dtype=np.float32) for line in proc.stdout if line.strip()]
    if proc.wait() != 0:
        sys.exit(f"check-qwen: bosch logits {' '.join(extra)} failed (exit {proc.returncode})")
    return np.stack(rows)


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--bosch", help="the bosch program (required unless --vectors)")
    p.add_argument("--vectors", action="store_true",
                   help="only print the expected values of tests/model's Qwen tests (C++), from tokenizers and gguf")
    p.add_argument("--text", default=str(pathlib.Path(__file__).with_name("fetch-parts.py")))
    p.add_argument("--tokens", type=int, default=256, help="tokens of --text for the logits")
    p.add_argument("--window", type=int, default=32)
    p.add_argument("--sinks", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--prompt", default="def fibonacci(n):")
    p.add_argument("--generate", type=int, default=48, help="greedy tokens to compare")
    p.add_argument("--tolerance", type=float, default=1e-3,
                   help="max |logit difference| (bosch is fp32, the reference float64; 4e-5 seen)")
    args = p.parse_args()
    if args.vectors:
        print_vectors(gguf.GGUFReader(args.model))
        return 0
    if not args.bosch:
        p.error("--bosch is required")
    failures = []

    def check(ok, what):
        print(("ok    " if ok else "FAIL  ") + what, flush=True)
        if not ok:
            failures.append(what)

    t0 = time.time()
    reader = gguf.GGUFReader(args.model)
    # ---- 1. header and tensors
    ftype = field(reader, "general.file_type")
    print(f"file: {args.model}: {field(reader, 'general.name')!r}, file type {ftype} "
          f"({gguf.LlamaFileType(ftype).name}), {len(reader.tensors)} tensors")
    check(field(reader, "general.architecture") == "qwen2", "architecture qwen2")
    check(ftype == gguf.LlamaFileType.MOSTLY_Q4_K_M, "file type Q4_K_M")
    hdr = {"layers": "block_count", "hidden_size": "embedding_length", "intermediate_size": "feed_forward_length",
           "query_heads": "attention.head_count", "kv_heads": "attention.head_count_kv",
           "context_length": "context_length", "rope_theta": "rope.freq_base"}
    for k, key in hdr.items():
        got = field(reader, f"qwen2.{key}")
        check(got == EXPECTED[k], f"qwen2.{key} = {got} (expected {EXPECTED[k]})")
    shapes = {"attn_norm.weight": [896], "attn_q.weight": [896, 896], "attn_q.bias": [896],
              "attn_k.weight": [896, 128], "attn_k.bias": [128], "attn_v.weight": [896, 128],
              "attn_v.bias": [128], "attn_output.weight": [896, 896], "ffn_norm.weight": [896],
              "ffn_gate.weight": [896, 4864], "ffn_up.weight": [896, 4864], "ffn_down.weight": [4864, 896]}
    want = {f"blk.{l}.{n}": s for l in range(24) for n, s in shapes.items()}
    want |= {"token_embd.weight": [896, 151936], "output.weight": [896, 151936], "output_norm.weight": [896]}
    got = {t.name: [int(d) for d in t.shape] for t in reader.tensors}
    check(got == want, f"{len(want)} tensors with the shapes of Qwen2.5-0.5B (GGUF order, fastest first)")
    types = {}
    for t in reader.tensors:
        types[t.tensor_type.name] = types.get(t.tensor_type.name, 0) + 1
    print(f"      tensor types: {types}")
    info = json.loads(subprocess.run([args.bosch, "inspect", args.model, "--json"], capture_output=True, text=True,
                                     check=True).stdout)
    for k, v in EXPECTED.items():
        check(info[k] == v, f"bosch inspect: {k} = {info[k]}")
    check(info["rope_style"] == "neox" and info["qkv_bias"] and not info["tie_embeddings"],
          f"bosch inspect: rope {info['rope_style']}, qkv_bias {info['qkv_bias']}, "
          f"tie_embeddings {info['tie_embeddings']}")
    check(info["tokenizer"]["pre"] == "qwen2" and info["tokenizer"]["kind"] == "byte_bpe",
          f"bosch inspect: tokenizer {info['tokenizer']}")

    # ---- 2. tokens (independent tokenizer)
    tok = hf_tokenizer(reader)
    text = pathlib.Path(args.text).read_text()
    ids = tok.encode(text, add_special_tokens=False).ids[:args.tokens]
    check(len(ids) == args.tokens, f"{len(ids)} tokens of {args.text}")
    check(tok.decode(ids) == text[:len(tok.decode(ids))], "the tokens decode to the text's start")

    # ---- 3. logits: bosch against the reference
    # bosch first (it holds its own fp32 copy of the weights), then the reference.
    rng = np.random.default_rng(args.seed)
    swa = rng.random((EXPECTED["layers"], EXPECTED["kv_heads"])) < 0.5
    print(f"      random mask (seed {args.seed}): {int(swa.sum())} of {swa.size} KV heads SWA, "
          f"window {args.window}")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        grid = pathlib.Path(tmp) / "mask.txt"
        grid.write_text("".join("".join("S" if b else "." for b in row) + "\n" for row in swa))
        variants = [("full", None, 0, []),
                    ("mask", swa, 0, ["--mask", str(grid), "--window", str(args.window), "--sinks", "0"]),
                    ("mask+sinks", swa, args.sinks,
                     ["--mask", str(grid), "--window", str(args.window), "--sinks", str(args.sinks)])]
        bosch = {}
        for name, _, _, extra in variants:
            t = time.time()
            bosch[name] = bosch_logits(args.bosch, args.model, ids, extra)
            print(f"      bosch logits ({name}): {time.time() - t:.0f} s", flush=True)
    t = time.time()
    out = subprocess.run([args.bosch, "generate", args.model, "--prompt", args.prompt, "--tokens",
                          str(args.generate), "--quiet"], capture_output=True, text=True, check=True).stdout
    bosch_text = out[:-1] if out.endswith("\n") else out
    print(f"      bosch generate: {time.time() - t:.0f} s")

    t = time.time()
    ref = Reference(reader)
    diff = ref.out - ref.embd
    rel = float(np.sqrt((diff.astype(np.float64) ** 2).mean() / (ref.embd.astype(np.float64) ** 2).mean()))
    check(rel < 0.1, f"output.weight (Q8_0) = token_embd (Q5_0) up to quantization (tied in Qwen2.5-0.5B): "
                     f"relative RMS difference {rel:.4f}")
    del diff
    print(f"      reference weights dequantized by gguf in {time.time() - t:.0f} s")
    for name, mask, sinks, _ in variants:
        t = time.time()
        r = ref.forward(ids, swa=mask, window=args.window, sinks=sinks)
        b = bosch[name].astype(np.float64)
        d = float(np.abs(r - b).max())
        d_late = float(np.abs(r[args.window:] - b[args.window:]).max())  # where the window cuts keys off
        dl = float(np.abs(log_softmax(r) - log_softmax(b)).max())
        agree = float((r.argmax(-1) == b.argmax(-1)).mean())
        results[name] = r
        print(f"      reference ({name}): {time.time() - t:.0f} s; logit range [{r.min():.1f}, {r.max():.1f}]")
        check(d <= args.tolerance, f"{name}: max |logit difference| {d:.2e} over {len(ids)} positions x "
                                   f"{r.shape[1]} ({d_late:.2e} from position {args.window} on; tolerance "
                                   f"{args.tolerance}); max |log-prob difference| {dl:.2e}; argmax agrees at "
                                   f"{agree:.1%} of positions")
    for name in ("mask", "mask+sinks"):
        moved = float(np.abs(results[name] - results["full"]).max())
        check(moved > 10 * args.tolerance, f"the {name} moves the reference's logits by up to {moved:.2f} "
                                           f"(> 10x the tolerance: the comparison sees the mask)")
    moved = float(np.abs(results["mask+sinks"] - results["mask"]).max())
    check(moved > 10 * args.tolerance, f"sinks move the reference's logits by up to {moved:.2f}")
    del results, bosch

    # ---- 4. greedy output
    t = time.time()
    prompt_ids = tok.encode(args.prompt, add_special_tokens=False).ids
    cache, gen = [], list(prompt_ids)
    logits = ref.forward(prompt_ids, 0, cache)
    eos = field(reader, "tokenizer.ggml.eos_token_id")
    for _ in range(args.generate):
        nxt = int(logits[-1].argmax())
        if nxt == eos:
            break
        gen.append(nxt)
        logits = ref.forward([nxt], len(gen) - 1, cache)
    ref_text = tok.decode(gen, skip_special_tokens=False)
    print(f"      reference greedy: {time.time() - t:.0f} s")
    print("---- bosch generate:\n" + bosch_text + "\n---- reference greedy:\n" + ref_text + "\n----")
    check(bosch_text == ref_text, f"greedy continuation of {args.prompt!r} ({len(gen) - len(prompt_ids)} tokens) "
                                  f"identical")
    print(f"check-qwen: {len(failures)} failed, {time.time() - t0:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
