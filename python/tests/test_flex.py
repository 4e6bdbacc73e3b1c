# SPDX-License-Identifier: Apache-2.0
"""bosch.flex, the block-sparse per-head windowed attention of the PyTorch
route: against a brute-force NumPy reference of the window rule (a window
off by one, ignored sinks, a query head mapped to the wrong KV group, a
decode offset all fail here), its block mask against the rule tile by tile,
and its memory at 32k tokens (a (heads, queries, keys) buffer would fail)."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the PyTorch route needs torch (scripts/test-python installs it)")
import bosch.flex as flex  # noqa: E402


def reference(q, k, v, swa_q, window, sinks, q_start, scale):
    """softmax(q k^T scale) v over the visible keys, float64, one (head,
    query, key) at a time through the rule as docs/algorithm.md states it."""
    hq, hkv = q.shape[1], k.shape[1]
    group = hq // hkv
    b, _, nq, d = q.shape
    out = np.zeros((b, hq, nq, d))
    for h in range(hq):
        for a in range(nq):
            i = q_start + a
            seen = [j for j in range(k.shape[2])
                    if j <= i and (not swa_q[h] or i - j < window or j < sinks)]
            s = np.einsum("bd,bkd->bk", q[:, h, a], k[:, h // group, seen]) * scale
            p = np.exp(s - s.max(-1, keepdims=True))
            p /= p.sum(-1, keepdims=True)
            out[:, h, a] = np.einsum("bk,bkd->bd", p, v[:, h // group, seen])
    return out


# (query heads, KV heads, keys, queries, window, sinks): windows across tile
# edges (128), window 1, a window longer than the sequence, sinks that span a
# tile, one decoded query and a chunk of queries against a longer past.
CASES = [
    (6, 2, 300, 300, 64, 0),
    (6, 2, 300, 300, 128, 4),
    (6, 3, 257, 257, 1, 0),
    (4, 2, 513, 1, 100, 3),
    (4, 2, 513, 7, 129, 3),
    (4, 4, 129, 129, 127, 2),
    (4, 2, 200, 200, 500, 0),
    (4, 1, 400, 400, 129, 130),
]


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled-fp32", "eager-fp64"])
@pytest.mark.parametrize("hq, hkv, n, nq, window, sinks", CASES)
def test_flex_attention_follows_the_window_rule(hq, hkv, n, nq, window, sinks, compiled):
    rng = np.random.default_rng(n * 7 + window)
    swa_kv = rng.random(hkv) < 0.5
    swa_kv[0] = True
    if hkv > 1:
        swa_kv[-1] = False  # both kinds of head
    swa_q = np.repeat(swa_kv, hq // hkv)
    d = 8
    q, k, v = (rng.standard_normal(s) for s in ((2, hq, nq, d), (2, hkv, n, d), (2, hkv, n, d)))
    dtype = torch.float32 if compiled else torch.float64
    t = lambda x: torch.tensor(x, dtype=dtype)
    out = flex.attention(t(q), t(k), t(v), torch.tensor(swa_q), window, sinks, scale=0.4, compile=compiled)
    want = reference(q, k, v, swa_q, window, sinks, n - nq, 0.4)
    np.testing.assert_allclose(out.double().numpy(), want, atol=2e-6 if compiled else 1e-12)


def test_flex_attention_sees_the_window_exactly():
    # Values that say which key was read: the output of a head whose query
    # scores every key alike is the mean of the positions it sees.
    n, window, sinks = 260, 33, 2
    k = torch.zeros(1, 2, n, 4)
    v = torch.arange(n, dtype=torch.float64).repeat(4, 1).T[None, None].repeat(1, 2, 1, 1)
    q = torch.zeros(1, 2, n, 4, dtype=torch.float64)
    out = flex.attention(q, k.double(), v, torch.tensor([True, False]), window, sinks, compile=False)[0, :, :, 0]
    for i in (0, 1, 2, 31, 32, 33, 34, 35, 127, 128, 129, 259):
        seen = [j for j in range(i + 1) if i - j < window or j < sinks]
        assert out[0, i].item() == pytest.approx(np.mean(seen), abs=1e-9), i
        assert out[1, i].item() == pytest.approx(i / 2, abs=1e-9), i


def test_block_mask_keeps_only_the_tiles_the_rule_reads():
    n, window, sinks, block = 32768, 1024, 4, flex.BLOCK
    swa_q = torch.tensor([True, False])
    bm = flex.block_mask(swa_q, window, sinks, n, n)
    tiles = n // block
    computed = (bm.kv_num_blocks + bm.full_kv_num_blocks)[0]  # (heads, query tiles)
    # SWA head: the sink tile, and the tiles from (first query - window + 1) to the diagonal.
    for r in range(tiles):
        lo = max(0, (r * block - window + 1) // block)
        want = (r + 1 - lo) + (1 if lo > 0 else 0)
        assert computed[0, r].item() == want, r
    assert computed[1].tolist() == list(range(1, tiles + 1))  # full head: causal
    assert int(computed[0].max()) == window // block + 2
    # The partial tiles (mask evaluated) are the diagonal and the window's edge only.
    assert int(bm.kv_num_blocks[0, 1].max()) == 1 and int(bm.kv_num_blocks[0, 0].max()) <= 3
    # The block mask is a few (heads, tiles, tiles) tables, 2 MiB here, not
    # a (heads, queries, keys) array (2 GiB as booleans).
    held = sum(t.numel() * t.element_size() for t in bm.as_tuple() if isinstance(t, torch.Tensor))
    assert held <= 4 * 2 * tiles * tiles * 4 + 65536


def test_flex_attention_memory_is_linear_at_32k_tokens():
    # One process, one SWA layer at 32768 tokens: scores for (4 heads x 32k x
    # 32k) would be 16 GiB, a boolean mask 4 GiB; the block-sparse kernel
    # needs the inputs (a few MB) and its tiles.
    code = textwrap.dedent("""
        import resource, torch, bosch.flex as flex
        torch.set_num_threads(2)
        n = 32768
        q = torch.randn(1, 4, n, 32); k = torch.randn(1, 2, n, 32); v = torch.randn(1, 2, n, 32)
        swa = torch.tensor([True] * 4)
        flex.attention(q[:, :, :256], k[:, :, :256], v[:, :, :256], swa, 1024, 4)  # compile first
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        out = flex.attention(q, k, v, swa, 1024, 4)
        grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        print(grew // 1024, bool(torch.isfinite(out).all()))
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    grew_mib, finite = p.stdout.split()
    assert finite == "True"
    assert int(grew_mib) < 512, f"peak memory grew {grew_mib} MiB at 32k tokens"


def test_flex_attention_falls_back_with_a_message_where_it_cannot_compile(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("no C++ compiler found\nInvalidCxxCompiler")

    monkeypatch.setattr(flex, "_compiled_flex", lambda: broken)
    monkeypatch.setattr(flex, "_compile_failed", {})
    q = torch.randn(1, 2, 5, 4)
    with pytest.warns(RuntimeWarning, match=r"could not build the block-sparse.*InvalidCxxCompiler.*eagerly"):
        out = flex.attention(q, q, q, torch.tensor([True, False]), 2, 0)
    want = reference(q.double().numpy(), q.double().numpy(), q.double().numpy(), [True, False], 2, 0, 0, 0.5)
    np.testing.assert_allclose(out.double().numpy(), want, atol=1e-5)
