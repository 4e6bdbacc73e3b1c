# SPDX-License-Identifier: Apache-2.0
"""The `hf` export in the engine itself (issue 48): Hugging Face transformers
loads the real GGUF models, once as converted and once with the export's
config patch merged into the configuration (what `jq -s '.[0] * .[1]'` does
to a config.json), on the same weights.

- Qwen2.5-Coder-0.5B (qwen2): the patch moves the logits, and the patched
  model's next-token log-probabilities equal `bosch logits --mask` of the
  same layer mask within scripts/check-hf's tolerance.
- SmolLM2-135M (llama): the patched logits are bitwise the unpatched ones,
  although bosch's windows move them: transformers' Llama has no sliding
  window, which is why the export refuses this architecture.

Needs torch and transformers (installed in CI's Python test environment) and
both models (scripts/fetch-model, with and without --model
qwen2.5-coder-0.5b). About a minute of CPU.
"""

import json

import numpy as np
import pytest
import torch
import transformers

import bosch

from conftest import CACHE, need, run

WINDOW = 16
TOKENS = 64
SWA_LAYERS = (1, 6, 12, 18)
TOLERANCE = 5e-4  # nats: scripts/check-hf's bound on |log p(transformers) - log p(bosch)|


@pytest.fixture(scope="module")
def qwen_model():
    return need(CACHE / "models" / "Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf",
                "Qwen2.5-Coder-0.5B (scripts/fetch-model --model qwen2.5-coder-0.5b)")


@pytest.fixture(scope="module")
def smollm2_model():
    return need(CACHE / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M (scripts/fetch-model)")


def load(path):
    """A GGUF model in transformers (dequantized to float32), evaluation mode."""
    return transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32).eval()


def with_patch(model, patch):
    """The same weights under the model's configuration merged with `patch`,
    built through the configuration class as a patched config.json would be."""
    merged = model.config.to_dict()
    merged.update(patch)
    config = type(model.config).from_dict(merged)
    with torch.device("meta"):
        other = type(model)(config)
    other.load_state_dict(model.state_dict(), assign=True)
    for name, buf in model.named_buffers():  # RoPE frequencies: not in the state dict
        module, _, attr = name.rpartition(".")
        other.get_submodule(module).register_buffer(attr, buf.clone(), persistent=False)
    return other.eval()


def logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].double().numpy()


def bosch_logits(cli, model, ids, mask_file=None):
    args = [cli, "logits", model, *ids, "--quiet"]
    if mask_file is not None:
        args += ["--mask", mask_file]
    rows = [np.array(line.split()[1:], dtype=np.float64) for line in run(args).stdout.splitlines() if line.strip()]
    return np.stack(rows)


def next_logp(x, ids):
    x = x - x.max(axis=-1, keepdims=True)
    lp = x - np.log(np.exp(x).sum(axis=-1, keepdims=True))
    return lp[np.arange(len(ids) - 1), np.array(ids[1:])]


def layer_mask(layout):
    m = np.zeros(layout.shape, dtype=bool)
    m[list(SWA_LAYERS), :] = True
    return m


def prompt(vocab):
    return [int(t) for t in np.random.default_rng(48).integers(100, min(vocab, 20000), TOKENS)]


def test_qwen2_transformers_applies_the_hf_export_as_bosch_does(bosch_cli, qwen_model, tmp_path):
    model = load(qwen_model)
    layout = bosch.HeadLayout(model.config.num_hidden_layers, model.config.num_attention_heads,
                              model.config.num_key_value_heads)
    # The mask as `bosch select --variant layer` would record it, and its export.
    bosch.write_mask(tmp_path / "mask.json", layer_mask(layout), layout,
                     metadata={"window": WINDOW, "sinks": 0, "architecture": "qwen2"})
    bosch.write_mask(tmp_path / "patch.json", bosch.read_mask(tmp_path / "mask.json"), format="hf")
    patch = json.loads((tmp_path / "patch.json").read_text())
    # The GGUF-derived config carries max_window_layers 28 for these 24
    # layers, which vLLM rejects with a window; the patch sets it.
    assert patch["max_window_layers"] == layout.num_layers
    patched = with_patch(model, patch)
    assert patched.config.sliding_window == WINDOW
    assert [t == "sliding_attention" for t in patched.config.layer_types] == list(layer_mask(layout)[:, 0])

    ids = prompt(model.config.vocab_size)
    full, windowed = logits(model, ids), logits(patched, ids)
    ours_full = bosch_logits(bosch_cli, qwen_model, ids)
    ours = bosch_logits(bosch_cli, qwen_model, ids, tmp_path / "mask.json")
    moved = float(np.abs(windowed - full).max())
    diff = float(np.abs(windowed - ours).max())
    lp_diff = float(np.abs(next_logp(windowed, ids) - next_logp(ours, ids)).max())
    lp_full = float(np.abs(next_logp(full, ids) - next_logp(ours_full, ids)).max())
    print(f"qwen2: patch moves transformers' logits by {moved:.3g}; patched vs bosch logits --mask: "
          f"max |logit diff| {diff:.3g}, max |log p diff| {lp_diff:.3g}; unpatched vs bosch full: {lp_full:.3g}")
    assert moved > 0.1  # the windows take effect ...
    assert lp_diff < TOLERANCE  # ... as bosch's do
    assert lp_full < TOLERANCE


def test_llama_transformers_ignores_the_windows_so_the_export_refuses(bosch_cli, smollm2_model, tmp_path):
    model = load(smollm2_model)
    layout = bosch.HeadLayout(model.config.num_hidden_layers, model.config.num_attention_heads,
                              model.config.num_key_value_heads)
    mask = layer_mask(layout)
    with pytest.raises(bosch.InvalidArgument, match="transformers.*Llama.*no sliding window"):
        bosch.write_mask(tmp_path / "patch.json", mask, layout, format="hf", window=WINDOW, model=smollm2_model)
    assert not (tmp_path / "patch.json").exists()
    # The patch it would have written, applied anyway.
    patch = {"layer_types": ["sliding_attention" if s else "full_attention" for s in mask[:, 0]],
             "sliding_window": WINDOW, "use_sliding_window": True}
    ids = prompt(model.config.vocab_size)
    full, patched = logits(model, ids), logits(with_patch(model, patch), ids)
    assert np.array_equal(patched, full)  # bitwise: nothing was windowed
    # What the windows would have done (bosch applies them).
    bosch.write_mask(tmp_path / "mask.json", mask, layout, metadata={"window": WINDOW, "sinks": 0})
    moved = float(np.abs(bosch_logits(bosch_cli, smollm2_model, ids, tmp_path / "mask.json") - full).max())
    print(f"llama: patched vs unpatched transformers logits identical; bosch's windows move them by {moved:.3g}")
    assert moved > 0.1
