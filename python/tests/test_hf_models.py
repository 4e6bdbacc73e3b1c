# SPDX-License-Identifier: Apache-2.0
"""The PyTorch route on the real models, from the same GGUF files bosch
reads (transformers dequantizes them): bosch.hf's block-sparse attention
gives the answer log-probabilities of bosch's own C++ forward on the C++
evaluator's own samples (TransformerEvaluator.samples()), masked and
unmasked, and greedy generation with the hybrid KV cache gives the tokens
of the masked forward. The tolerance, 2e-4 nats on a sample's mean answer
log-probability, is 4x the largest difference measured at 512 and 2048
tokens (docs/pytorch.md)."""

import os

import numpy as np
import pytest

from conftest import CACHE, need

torch = pytest.importorskip("torch", reason="the PyTorch route needs torch (scripts/test-python installs it)")
pytest.importorskip("transformers")
pytest.importorskip("gguf", reason="transformers reads GGUF files through the gguf package")
import bosch  # noqa: E402
import bosch.hf  # noqa: E402

TOLERANCE = 2e-4
MODELS = {
    "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "qwen2.5-coder-0.5b": "Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf",
}


@pytest.fixture(scope="module", autouse=True)
def quiet():
    os.environ["TQDM_DISABLE"] = "1"
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))


def evaluators(name, context=512):
    path = need(CACHE / "models" / MODELS[name], f"model {name} (scripts/fetch-model --model {name})")
    cpp = bosch.TransformerEvaluator(str(path), context=context, precision="fp32", tasks="passkey,niah_single_2",
                                     samples=1, window=64, sinks=4)
    hf = bosch.hf.HFEvaluator.like(cpp, str(path.parent), gguf_file=path.name)
    return cpp, hf


@pytest.mark.parametrize("name", list(MODELS))
def test_hf_route_gives_the_answer_log_probabilities_of_bosch(name):
    cpp, hf = evaluators(name)
    rng = np.random.default_rng(7)
    half = np.zeros(cpp.layout.size, bool)
    half[rng.choice(cpp.layout.size, cpp.layout.size // 2, replace=False)] = True
    half = half.reshape(cpp.layout.shape)
    scores = {}
    for label, mask in (("full", np.zeros_like(half)), ("rho 0.5", half)):
        ours = hf.sample_scores(mask)
        theirs = cpp.evaluate(mask)
        assert len(ours) == cpp.calibration_samples == 2
        assert abs(ours.mean() - theirs) < TOLERANCE, (label, ours, theirs)
        scores[label] = ours.mean()
    assert abs(scores["full"] - scores["rho 0.5"]) > 100 * TOLERANCE  # the windows take effect
    # The racing protocol: the C++ evaluator's race order, any subset scored alone.
    assert hf.race_order() == cpp.race_order()
    assert hf.score_samples(half, [1]).tolist() == [ours[1]]
    assert hf.reduce(ours.tolist()) == hf.evaluate(half)


def test_hybrid_cache_generates_what_the_masked_forward_predicts_on_smollm2():
    cpp, hf = evaluators("smollm2")
    rng = np.random.default_rng(3)
    mask = rng.random(cpp.layout.shape) < 0.5
    hf.attention.mask = mask
    prompt, _ = hf.samples[0]
    ids = torch.tensor([prompt])
    cache = hf.attention.new_cache()
    with torch.no_grad():
        out = hf.model.generate(ids, attention_mask=torch.ones_like(ids), past_key_values=cache, max_new_tokens=24,
                                min_new_tokens=24, do_sample=False, output_logits=True,
                                return_dict_in_generate=True)
        seq = out.sequences
        forward = hf.model(seq).logits[0, len(prompt) - 1:-1]
    steps = torch.stack(out.logits, 1)[0]
    assert torch.equal(forward.argmax(-1), seq[0, len(prompt):])
    assert (forward - steps).abs().max().item() < 1e-3
    # The cache holds every position of a full head, sinks + window of an SWA head.
    cfg = hf.model.config
    d = cfg.hidden_size // cfg.num_attention_heads
    rows = cache.layers[0].full_k.shape[2]
    want = 2 * d * 4 * (int((~mask).sum()) * rows + int(mask.sum()) * (4 + 64))
    assert cache.bytes() == want
    assert cache.bytes() < 0.6 * bosch.hybrid_cache.dense_cache_bytes(cfg, 1, rows, torch.float32)
