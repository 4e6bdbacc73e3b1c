# SPDX-License-Identifier: Apache-2.0
"""bosch.hf's attention and hybrid KV cache in transformers, on small random
Llama and Qwen2 models (no model file): the flex backend against the dense
reference, greedy generation with the hybrid cache against the masked
forward pass over the generated sequence (a ring that does not wrap, a head
stored in the wrong group or a sink dropped all change the tokens or the
logits), a prompt fed in chunks, and the bytes the cache holds against the
formula of docs/deployment.md."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the PyTorch route needs torch (scripts/test-python installs it)")
transformers = pytest.importorskip("transformers")
import bosch.hf  # noqa: E402


def tiny_model(attention, arch="llama", layers=3, heads=6, kv_heads=3, seed=0):
    attention.register()
    torch.manual_seed(seed)
    kw = dict(vocab_size=97, hidden_size=48, intermediate_size=64, num_hidden_layers=layers,
              num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=4096,
              attn_implementation=bosch.hf.ATTENTION_NAME, eos_token_id=None, bos_token_id=None)
    if arch == "llama":
        cfg = transformers.LlamaConfig(**kw)
        model = transformers.LlamaForCausalLM(cfg)
    else:
        cfg = transformers.Qwen2Config(**kw)
        model = transformers.Qwen2ForCausalLM(cfg)
    # Larger weights than the initialisation's, so that attention is far
    # from uniform and a wrong key set shows in the outputs.
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(8.0 if p.dim() == 2 else 1.0)
    model.generation_config.eos_token_id = None  # generate every token asked for
    return model.eval()


MASK = np.array([[True, False, True], [False, True, True], [True, True, False]])


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_flex_backend_equals_the_dense_reference_in_a_model(arch):
    attention = bosch.hf.WindowedAttention(9, 2, mask=MASK)
    model = tiny_model(attention, arch)
    ids = torch.randint(0, 97, (2, 300), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        flex = model(ids).logits
        attention.backend = "dense"
        dense = model(ids).logits
        attention.mask = np.zeros_like(MASK)
        full = model(ids).logits
    assert (flex - dense).abs().max().item() < 1e-4
    assert (flex - full).abs().max().item() > 1e-1  # the windows change the outputs


@pytest.mark.parametrize("window, sinks", [(7, 0), (7, 3), (1, 1), (40, 2)])
def test_hybrid_cache_generates_the_masked_forward_greedily(window, sinks):
    attention = bosch.hf.WindowedAttention(window, sinks, mask=MASK)
    model = tiny_model(attention)
    prompt = torch.randint(0, 97, (1, 23), generator=torch.Generator().manual_seed(window))
    cache = attention.new_cache()
    with torch.no_grad():
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt), past_key_values=cache,
                             max_new_tokens=60, do_sample=False, output_logits=True,
                             return_dict_in_generate=True, pad_token_id=0)
        seq = out.sequences
        full = model(seq).logits[0, prompt.shape[1] - 1:-1]
    steps = torch.stack(out.logits, 1)[0]
    assert seq.shape[1] == prompt.shape[1] + 60  # the ring wrapped several times (window 7, 83 positions)
    assert torch.equal(full.argmax(-1), seq[0, prompt.shape[1]:])
    assert (full - steps).abs().max().item() < 1e-4
    # Bytes: every position for a full KV head, sinks + window for an SWA head.
    d = model.config.hidden_size // model.config.num_attention_heads
    layer0 = cache.layers[0]
    full_rows = layer0.full_k.shape[2]  # the capacity the full heads grew to
    assert full_rows >= seq.shape[1] - 1
    per_row = 2 * d * 4
    want = sum(per_row * (full_rows if not swa else sinks + window) for row in MASK for swa in row)
    assert cache.bytes() == want


def test_a_short_sequence_holds_only_its_positions_and_the_ring_grows_past_them():
    # T < sinks + window: an SWA head holds T positions (the formula's
    # min(T, sinks + window)); generating past it grows the ring to s + w.
    window, sinks, tokens = 40, 2, 30
    attention = bosch.hf.WindowedAttention(window, sinks, mask=MASK)
    model = tiny_model(attention)
    d = model.config.hidden_size // model.config.num_attention_heads
    full_heads, swa_heads = int((~MASK).sum()), int(MASK.sum())
    ids = torch.randint(0, 97, (1, tokens), generator=torch.Generator().manual_seed(5))
    cache = attention.new_cache(capacity=tokens)
    with torch.no_grad():
        model(ids, past_key_values=cache)
    assert cache.bytes() == 2 * d * 4 * (full_heads + swa_heads) * tokens
    prompt = ids[:, :23]
    cache = attention.new_cache(capacity=tokens)
    with torch.no_grad():
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt), past_key_values=cache,
                             max_new_tokens=60, do_sample=False, pad_token_id=0)
        full = model(out).logits[0, prompt.shape[1] - 1:-1]
    assert torch.equal(full.argmax(-1), out[0, prompt.shape[1]:])
    assert cache.layers[0].ring_k.shape[2] == sinks + window  # grew from 30 slots, then wrapped


def test_hybrid_cache_with_a_preallocated_capacity_holds_the_formula_exactly():
    window, sinks, tokens = 16, 4, 120
    attention = bosch.hf.WindowedAttention(window, sinks, mask=MASK)
    model = tiny_model(attention)
    cache = attention.new_cache(capacity=tokens)
    ids = torch.randint(0, 97, (1, tokens), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        model(ids, past_key_values=cache)
    d = model.config.hidden_size // model.config.num_attention_heads
    full_heads, swa_heads = int((~MASK).sum()), int(MASK.sum())
    assert cache.bytes() == 2 * d * 4 * (full_heads * tokens + swa_heads * (sinks + window))
    dense = bosch.hybrid_cache.dense_cache_bytes(model.config, 1, tokens, torch.float32)
    assert dense == 2 * d * 4 * MASK.size * tokens
    # The ring of an SWA head holds the sinks and exactly the last `window` positions.
    pos = cache.layers[0].ring_pos.tolist()
    assert sorted(pos) == list(range(sinks)) + list(range(tokens - window, tokens))


def test_hybrid_cache_takes_the_prompt_in_chunks():
    attention = bosch.hf.WindowedAttention(11, 2, mask=MASK)
    model = tiny_model(attention)
    ids = torch.randint(0, 97, (1, 90), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        whole = model(ids).logits
        cache = attention.new_cache()
        parts = [model(ids[:, a:b], past_key_values=cache).logits for a, b in ((0, 30), (30, 31), (31, 90))]
    assert (torch.cat(parts, 1) - whole).abs().max().item() < 1e-4


def test_hybrid_cache_refuses_what_it_cannot_do():
    attention = bosch.hf.WindowedAttention(8, 0)
    with pytest.raises(RuntimeError, match="no head mask set"):
        attention.new_cache()
    attention.mask = MASK
    model = tiny_model(attention)
    cache = attention.new_cache()
    with pytest.raises(NotImplementedError, match="beam search"):
        model.generate(torch.tensor([[1, 2, 3]]), past_key_values=cache, num_beams=2, max_new_tokens=3,
                       do_sample=False, pad_token_id=0)
    wrong = bosch.hf.WindowedAttention(8, 0, mask=np.ones((3, 2), bool)).new_cache()
    with pytest.raises(ValueError, match="3 KV heads; the head mask has 2"):
        with torch.no_grad():
            model(torch.tensor([[1, 2, 3]]), past_key_values=wrong)


def test_left_padding_is_refused_and_right_padding_leaves_the_tokens_alone():
    attention = bosch.hf.WindowedAttention(5, 1, mask=MASK)
    model = tiny_model(attention)
    ids = torch.randint(1, 97, (1, 20), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        alone = model(ids).logits
        padded = torch.cat([ids, torch.zeros(1, 6, dtype=torch.long)], 1)
        right = model(padded, attention_mask=torch.cat([torch.ones(1, 20), torch.zeros(1, 6)], 1).long()).logits
        assert (right[:, :20] - alone).abs().max().item() < 1e-5
        with pytest.raises(ValueError, match="left .*padding is not supported"):
            model(padded.flip(1), attention_mask=torch.cat([torch.zeros(1, 6), torch.ones(1, 20)], 1).long())


def test_hf_evaluator_on_a_loaded_model_scores_any_subset_and_interleaves_the_tasks():
    attention = bosch.hf.WindowedAttention(9, 2)
    model = tiny_model(attention)
    rng = np.random.default_rng(0)
    tasks = [{"task": name, "prompt": rng.integers(0, 97, 40).tolist(), "answer": rng.integers(0, 97, 2).tolist()}
             for name in ("a", "a", "b", "c", "b")]
    ev = bosch.hf.HFEvaluator(model, 9, 2, tasks=tasks, compile=False)
    assert ev.race_order() == [0, 2, 3, 1, 4]  # every task's first sample, then the seconds
    all_scores = ev.sample_scores(MASK)
    assert ev.cost() == 5
    assert ev.score_samples(MASK, [4, 1]).tolist() == [all_scores[4], all_scores[1]]
    assert ev.cost() == 7
    assert ev.reduce(all_scores.tolist()) == ev.evaluate(MASK)
    assert ev.evaluate(np.zeros_like(MASK)) != ev.evaluate(MASK)
    with pytest.raises(IndexError, match="sample 5 is not within the 5 samples"):
        ev.score_samples(MASK, [5])
    with pytest.raises(ValueError, match="permutation of the 5 samples"):
        bosch.hf.HFEvaluator(model, 9, 2, tasks=tasks, race_order=[0, 0, 1, 2, 3])
    with pytest.raises(ValueError, match="give tasks"):
        bosch.hf.HFEvaluator(model, 9, 2)
