# SPDX-License-Identifier: Apache-2.0
"""bosch.flex: per-head sliding windows as FlexAttention block masks.

A query of an SWA head at position i sees the keys j with i - window < j <= i
and the keys j < sinks; a full head sees every j <= i (bosch's window rule,
docs/algorithm.md). FlexAttention (``torch.nn.attention.flex_attention``)
runs attention tile by tile and skips the tiles a block mask leaves out, so
an SWA head costs O(n w) time and no (heads, queries, keys) array is ever
built. The block mask is computed here from the window rule in closed form
over the (query tile, key tile) grid, a few KB even at 32k tokens, instead
of by evaluating the rule at every (query, key) pair.

``attention(query, key, value, swa_q, window, sinks)`` is the whole
interface; bosch.hf wraps it for transformers. Compiled (the default) the
kernel is block-sparse on the CPU (inductor's C++ template) and on GPUs
(Triton); eager FlexAttention computes dense scores and is meant for short
inputs and for checking.
"""

import threading
import warnings

import torch
from torch.nn.attention.flex_attention import BlockMask, flex_attention

#: Tile edge in tokens (FlexAttention's default sparse block size).
BLOCK = 128

_lock = threading.Lock()
_compiled = None
#: (device type, dtype) -> why torch.compile failed there (eager from then on).
_compile_failed = {}


def _compiled_flex():
    global _compiled
    with _lock:
        if _compiled is None:
            # dynamic=True: one compilation serves every sequence length
            # (dynamic=False recompiles for each new length, 6-20 s each).
            _compiled = torch.compile(flex_attention, dynamic=True)
        return _compiled


def block_classes(q_start, q_len, k_len, window, sinks, block=BLOCK, device="cpu"):
    """Tile classes over the (query tile, key tile) grid for queries at
    positions q_start .. q_start + q_len - 1 against keys 0 .. k_len - 1.

    Returns (any_full, all_full, any_swa, all_swa), bool (q_tiles, k_tiles):
    for a full head (causal) and for an SWA head, whether some pair of the
    tile is visible (the tile is computed) and whether every pair is (the
    tile needs no mask evaluation)."""
    qt = -(-q_len // block)
    kt = -(-k_len // block)
    qs = q_start + torch.arange(qt, device=device) * block  # first query position of each tile
    qe = torch.clamp(qs + block - 1, max=q_start + q_len - 1)  # last query position
    ks = torch.arange(kt, device=device) * block
    ke = torch.clamp(ks + block - 1, max=k_len - 1)
    qs, qe, ks, ke = qs[:, None], qe[:, None], ks[None, :], ke[None, :]
    # Tiles cut by the end of the sequences hold pairs past the end, which the
    # kernel masks; they are never "all visible".
    whole = ((qs - q_start + block) <= q_len) & ((ks + block) <= k_len)
    any_full = ks <= qe
    all_full = (ke <= qs) & whole
    # SWA: some key j in the tile with j <= i and (i - j < window or j < sinks).
    any_swa = any_full & ((ke > qs - window) | (ks < sinks))
    all_swa = all_full & ((ke < sinks) | (qe - ks < window))
    return any_full, all_full, any_swa, all_swa


def _ordered(flags):
    """(count, indices) of the True tiles of each row, ascending, as
    FlexAttention's kv_num_blocks / kv_indices."""
    count = flags.sum(-1, dtype=torch.int32)
    order = torch.argsort((~flags).to(torch.int8), dim=-1, stable=True).to(torch.int32)
    return count, order


def block_mask(swa_q, window, sinks, q_len, k_len, q_start=None, block=BLOCK):
    """The FlexAttention BlockMask of one layer: swa_q bool (query heads,),
    True = that query head's KV head uses the window. Queries sit at the last
    q_len positions of the k_len keys unless q_start says otherwise."""
    device = swa_q.device
    if q_start is None:
        q_start = k_len - q_len
    any_full, all_full, any_swa, all_swa = block_classes(q_start, q_len, k_len, window, sinks, block, device)
    sel = swa_q[:, None, None]
    partial = torch.where(sel, any_swa & ~all_swa, any_full & ~all_full)[None]  # (1, Hq, qt, kt)
    complete = torch.where(sel, all_swa, all_full)[None]
    num, idx = _ordered(partial)
    full_num, full_idx = _ordered(complete)
    offset = torch.tensor(q_start, device=device)
    swa_h = swa_q.clone()

    def mask_mod(b, h, q_idx, kv_idx):
        i = q_idx + offset
        return (kv_idx <= i) & (~swa_h[h] | (i - kv_idx < window) | (kv_idx < sinks))

    # compute_q_blocks=False: the transposed tables serve only the backward pass.
    return BlockMask.from_kv_blocks(num, idx, full_num, full_idx, BLOCK_SIZE=block, mask_mod=mask_mod,
                                    seq_lengths=(q_len, k_len), compute_q_blocks=False)


def attention(query, key, value, swa_q, window, sinks, scale=None, compile=True, q_start=None):
    """Per-head windowed attention. query (b, Hq, q, d); key, value
    (b, Hkv, k, d) with Hkv dividing Hq (grouped-query attention, no copies
    of the keys); swa_q bool (Hq,). Returns (b, Hq, q, d).

    compile: run the compiled, block-sparse kernel (falls back to eager
    FlexAttention, with a warning, where torch.compile cannot build it)."""
    bm = block_mask(swa_q, window, sinks, query.shape[-2], key.shape[-2], q_start)
    gqa = query.shape[1] != key.shape[1]
    where = (query.device.type, query.dtype)
    if compile and where not in _compile_failed:
        try:
            return _compiled_flex()(query, key, value, block_mask=bm, scale=scale, enable_gqa=gqa)
        except Exception as e:  # no C++ compiler, an unsupported device or dtype, ...
            first = str(e).strip().splitlines()
            _compile_failed[where] = f"{type(e).__name__}: {first[-1] if first else ''}"
            warnings.warn(f"bosch: torch.compile could not build the block-sparse FlexAttention kernel for "
                          f"{query.dtype} on {query.device.type} ({_compile_failed[where]}); running "
                          "FlexAttention eagerly there, which computes dense (heads, queries, keys) scores: "
                          "fine for short inputs, not for long contexts", RuntimeWarning, stacklevel=2)
    with warnings.catch_warnings():  # torch's own "called without torch.compile" note: said above
        warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
        return flex_attention(query, key, value, block_mask=bm, scale=scale, enable_gqa=gqa)
