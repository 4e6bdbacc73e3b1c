#!/usr/bin/env python3
"""Writes ggml_blocks.txt: test vectors for bosch's dequantization, decoded by an
independent implementation (the numpy reference in the `gguf` Python package,
gguf-py, which ports ggml's dequantize_row_* functions).

For each type, BLOCKS blocks of random bytes are drawn (seeded), with every fp16
scale field replaced by a finite value of moderate size so the expected values
are finite. Output format, one section per type:

    type NAME BLOCKS
    bytes HEX...           (all blocks, lowercase hex)
    values V0 V1 ...       (float32 values, repr with 9 significant digits)

Regenerate with: python3 tests/model/data/make_ggml_blocks.py > tests/model/data/ggml_blocks.txt
"""
import numpy as np
from gguf import GGMLQuantizationType as T, GGML_QUANT_SIZES
from gguf.quants import dequantize

BLOCKS = 3
rng = np.random.default_rng(20260407)

# Byte offsets of the fp16 scale fields inside one block of each type.
HALF_FIELDS = {
    T.Q4_0: [0],
    T.Q4_1: [0, 2],
    T.Q8_0: [0],
    T.Q4_K: [0, 2],
    T.Q5_0: [0],
    T.Q5_1: [0, 2],
    T.Q5_K: [0, 2],
    T.Q6_K: [208],
    T.F16: [0],
    T.BF16: [],
}


def random_half(rng, n):
    # Magnitudes 2^-12 .. 2^-2, random sign: like real weight scales.
    v = rng.uniform(-12, -2, n)
    s = rng.choice([-1.0, 1.0], n)
    return (s * 2.0 ** v).astype(np.float16)


for qtype in [T.Q4_0, T.Q4_1, T.Q8_0, T.Q4_K, T.Q6_K, T.F16, T.BF16, T.Q5_0, T.Q5_1, T.Q5_K]:
    block_elems, block_bytes = GGML_QUANT_SIZES[qtype]
    n_blocks = BLOCKS if block_elems > 1 else 64
    raw = rng.integers(0, 256, size=(n_blocks, block_bytes), dtype=np.uint8)
    for off in HALF_FIELDS[qtype]:
        h = random_half(rng, n_blocks).view(np.uint8).reshape(n_blocks, 2)
        raw[:, off:off + 2] = h
    if qtype == T.BF16:
        # Finite bfloat16 values: high byte = sign | 0x3c..0x3f (|x| about 2^-7 .. 2).
        raw[:, 1] = (raw[:, 1] & 0x80) | 0x3c | (raw[:, 1] & 0x03)
    values = dequantize(raw.reshape(-1), qtype).astype(np.float32).reshape(-1)
    assert np.all(np.isfinite(values)), qtype.name
    print(f"type {qtype.name} {n_blocks}")
    print("bytes " + raw.reshape(-1).tobytes().hex())
    print("values " + " ".join(f"{float(v):.9g}" for v in values))
