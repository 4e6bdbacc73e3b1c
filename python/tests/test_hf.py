# SPDX-License-Identifier: Apache-2.0
"""bosch.hf, the per-KV-head attention for Hugging Face transformers: what it
does without torch (import, the window rule in NumPy, argument checks, and a
clear ImportError naming the missing package), and, where torch is
installed (scripts/check-hf's venv), the attention itself against a NumPy
reference. The model-level check (transformers vs bosch's log-probabilities,
kvpress) is scripts/check-hf."""

import subprocess
import sys

import numpy as np
import pytest

import bosch
import bosch.hf


def brute_force(swa_kv, num_query_heads, q_positions, k_positions, window, sinks):
    group = num_query_heads // len(swa_kv)
    out = np.zeros((num_query_heads, len(q_positions), len(k_positions)), bool)
    for h in range(num_query_heads):
        for a, i in enumerate(q_positions):
            for b, j in enumerate(k_positions):
                if j > i:
                    continue
                out[h, a, b] = (not swa_kv[h // group]) or (i - window < j) or (j < sinks)
    return out


WINDOW_CASES = [
    (4, 8, 12, 12, 3, 0),  # prefill
    (4, 8, 12, 12, 3, 2),  # with sinks
    (3, 9, 1, 17, 5, 1),   # one decoded token against a cache
    (2, 2, 5, 9, 1, 0),    # window 1: a local head sees only itself
    (2, 6, 7, 7, 10, 0),   # window wider than the sequence: local = full
]


@pytest.mark.parametrize("kv, hq, q_len, k_len, window, sinks", WINDOW_CASES)
def test_hf_window_mask_matches_the_windows_rule(kv, hq, q_len, k_len, window, sinks):
    rng = np.random.default_rng(kv * 100 + q_len)
    swa = rng.random(kv) < 0.5
    swa[0], swa[-1] = True, False
    k_pos = np.arange(k_len)
    q_pos = k_pos[k_len - q_len:]
    got = bosch.hf.window_mask(swa, hq, q_pos, k_pos, window, sinks)
    assert got.dtype == np.bool_ and got.shape == (hq, q_len, k_len)
    assert np.array_equal(got, brute_force(swa, hq, q_pos, k_pos, window, sinks))
    group = hq // kv
    assert got[:group].sum() <= got[-group:].sum()  # head 0 is local, the last is full


def test_hf_window_mask_refuses_heads_that_do_not_group():
    with pytest.raises(ValueError, match="7 query heads do not divide into 3 KV heads"):
        bosch.hf.window_mask(np.array([True, False, True]), 7, np.arange(4), np.arange(4), 2)


def test_hf_import_needs_neither_torch_nor_transformers():
    # A fresh interpreter, so that no other test has imported them; and one
    # where they cannot be imported at all.
    code = "import sys, bosch, bosch.hf; print('torch' in sys.modules, 'transformers' in sys.modules)"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert p.stdout.split() == ["False", "False"]
    blocked = ("import sys; sys.modules['torch'] = sys.modules['transformers'] = None; "
               "import bosch, bosch.hf; print(bosch.hf.window_mask.__name__)")
    p = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["window_mask"]


class Module:
    def __init__(self, layer_idx):
        self.layer_idx = layer_idx


def test_hf_without_torch_raises_an_import_error_naming_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now fails
    monkeypatch.setitem(sys.modules, "transformers", None)
    attention = bosch.hf.WindowedAttention(16, sinks=4, mask=np.zeros((2, 3), bool))
    with pytest.raises(ImportError, match=r"the attention function needs torch, which is not installed"):
        attention(Module(0), None, None, None, None)
    with pytest.raises(ImportError, match=r"registering the attention function needs transformers"):
        attention.register()
    with pytest.raises(ImportError, match=r"load_model needs torch"):
        bosch.hf.load_model("some/model", attention)
    with pytest.raises(ImportError, match=r"HFEvaluator needs torch, which is not installed \(pip install torch"):
        bosch.hf.HFEvaluator("some/model", window=16)


def test_hf_attention_checks_its_arguments():
    with pytest.raises(ValueError, match="backend must be one of flex, dense, got 'sparse'"):
        bosch.hf.WindowedAttention(8, backend="sparse")
    for bad in (0, -3, 2.5, True, None):
        with pytest.raises(ValueError, match="window must be an integer >= 1"):
            bosch.hf.WindowedAttention(bad)
    with pytest.raises(ValueError, match="sinks must be an integer >= 0"):
        bosch.hf.WindowedAttention(8, sinks=-1)
    attention = bosch.hf.WindowedAttention(8)
    assert attention.mask is None
    for shape in ((6,), (2, 3, 1), (0, 3)):
        with pytest.raises(ValueError, match=r"non-empty \(layers, kv_heads\) array"):
            attention.mask = np.zeros(shape, bool)
    with pytest.raises(ValueError, match="must hold booleans"):
        attention.mask = np.full((2, 3), 0.5)
    attention.mask = [[1, 0, 0], [0, 1, 1]]  # 0/1 integers are a mask too
    assert attention.mask.dtype == np.bool_ and attention.mask.tolist() == [[True, False, False], [False, True, True]]
    # A mask from a mask file: (layers, kv_heads) as bosch writes it.
    attention.mask = bosch.mask_from_scores(np.arange(6.0).reshape(2, 3), 0.5)  # what bosch returns
    assert attention.mask.shape == (2, 3) and int(attention.mask.sum()) == 3


def test_hf_passkey_samples_are_seeded_and_end_with_the_key():
    class Words:  # a whitespace tokenizer: one id per word
        def __call__(self, text, add_special_tokens=True):
            class Out:
                pass
            out = Out()
            out.input_ids = [sum(map(ord, w)) for w in text.split()]
            return out

    a = bosch.hf.make_passkey_samples(Words(), 200, 3, seed=5)
    assert a == bosch.hf.make_passkey_samples(Words(), 200, 3, seed=5)
    assert a != bosch.hf.make_passkey_samples(Words(), 200, 3, seed=6)
    assert len(a) == 3
    for prompt, answer in a:
        assert len(answer) == 1 and answer[0] in prompt  # the key is in the text before the question
        assert 120 <= len(prompt) + len(answer) <= 200


def reference_attention(q, k, v, allowed, scale):
    """softmax(q k^T * scale, masked) v per head, in float64 NumPy."""
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = np.einsum("bhqd,bhkd->bhqk", q, k) * scale
    s = np.where(allowed[None], s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bhqk,bhkd->bqhd", p, v)


@pytest.mark.parametrize("backend", bosch.hf.BACKENDS)
@pytest.mark.parametrize("sinks", [0, 2])
def test_hf_attention_equals_masked_softmax_attention(sinks, backend):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(sinks)
    layers, kv, hq, n, d, window = 3, 2, 6, 11, 8, 4
    swa = np.array([[True, False], [False, False], [True, True]])
    # float64: FlexAttention runs it eagerly (its compiled CPU kernel takes fp32/fp16/bf16).
    attention = bosch.hf.WindowedAttention(window, sinks, mask=swa, backend=backend, compile=False)
    for layer in range(layers):
        for q_len in (n, 1):  # prefill, and one query against the whole sequence's keys
            q = rng.standard_normal((1, hq, q_len, d))
            k = rng.standard_normal((1, kv, n, d))
            v = rng.standard_normal((1, kv, n, d))
            out, weights = attention(Module(layer), *(torch.tensor(x) for x in (q, k, v)), None, 0.0, 0.3)
            assert weights is None and tuple(out.shape) == (1, q_len, hq, d)
            allowed = brute_force(swa[layer], hq, np.arange(n - q_len, n), np.arange(n), window, sinks)
            np.testing.assert_allclose(out.numpy(), reference_attention(q, k, v, allowed, 0.3), atol=1e-10)
    with pytest.raises(ValueError, match="attention layer 3 is outside the head mask's 3 layers"):
        attention(Module(3), torch.zeros(1, hq, 2, d), torch.zeros(1, kv, 2, d), torch.zeros(1, kv, 2, d), None)
    with pytest.raises(ValueError, match="layer 0 has 6 query and 3 KV heads; the head mask has 2"):
        attention(Module(0), torch.zeros(1, hq, 2, d), torch.zeros(1, 3, 2, d), torch.zeros(1, 3, 2, d), None)
    with pytest.raises(RuntimeError, match="no head mask set"):
        bosch.hf.WindowedAttention(4)(Module(0), torch.zeros(1, 2, 1, d), torch.zeros(1, 2, 1, d),
                                      torch.zeros(1, 2, 1, d), None)
