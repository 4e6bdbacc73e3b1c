# SPDX-License-Identifier: Apache-2.0
"""bosch.kvpress.MaskPress: kvpress's DuoAttentionPress on a bosch mask,
from a mask file or the exported pattern directory, with no download:
its streaming heads are exactly the mask's SWA heads on the real models'
configurations, and in a running model it masks exactly those heads' keys
between the sinks and the last window - 1 prompt positions."""

import types

import numpy as np
import pytest

from conftest import CACHE, need, run

torch = pytest.importorskip("torch", reason="the PyTorch route needs torch (scripts/test-python installs it)")
transformers = pytest.importorskip("transformers")
pytest.importorskip("kvpress")
import bosch  # noqa: E402
from bosch.kvpress import MaskPress  # noqa: E402

MODELS = {
    "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "qwen2.5-coder-0.5b": "Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf",
}


@pytest.mark.parametrize("name", list(MODELS))
def test_mask_press_marks_exactly_the_masks_swa_heads(name, bosch_cli, tmp_path):
    path = need(CACHE / "models" / MODELS[name], f"model {name} (scripts/fetch-model --model {name})")
    config = transformers.AutoConfig.from_pretrained(str(path.parent), gguf_file=path.name)
    shape = (config.num_hidden_layers, config.num_key_value_heads)
    layout = bosch.HeadLayout(shape[0], config.num_attention_heads, shape[1])
    rng = np.random.default_rng(11)
    mask = rng.random(shape) < 0.4
    bosch.write_mask(tmp_path / "m.json", mask, layout, metadata={"window": 64, "sinks": 4})
    run([bosch_cli, "convert", tmp_path / "m.json", "--to", "kvpress", "-o", tmp_path / "pattern"])
    model = types.SimpleNamespace(config=config, device=torch.device("cpu"))  # all the press reads
    for source in (tmp_path / "m.json", tmp_path / "pattern", bosch.read_mask(tmp_path / "m.json")):
        press = MaskPress(source)
        press.post_init_from_model(model)
        assert press.streaming_mask.dtype == torch.bool
        assert np.array_equal(press.streaming_mask.numpy(), mask), source
        assert (press.sink_size, press.recent_size) == (4, 63)
        assert press.head_compression_ratio == pytest.approx(mask.mean())
    with pytest.raises(ValueError, match=r"the mask has 3 layers x 2 KV heads; the model has"):
        MaskPress(np.ones((3, 2), bool), window=8).post_init_from_model(model)


def test_mask_press_refuses_what_kvpress_cannot_express(tmp_path):
    with pytest.raises(ValueError, match="needs a mask"):
        MaskPress()
    with pytest.raises(ValueError, match="no window"):
        MaskPress(np.ones((2, 2), bool))
    with pytest.raises(ValueError, match=r"window 1: kvpress keeps at least one recent key"):
        MaskPress(np.ones((2, 2), bool), window=1)


def test_mask_press_masks_those_heads_keys_in_a_running_model():
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=97, hidden_size=48, intermediate_size=64, num_hidden_layers=3,
                                   num_attention_heads=6, num_key_value_heads=3, attn_implementation="sdpa")
    model = transformers.LlamaForCausalLM(cfg).eval()
    mask = np.array([[True, False, True], [False, False, False], [False, True, True]])
    window, sinks, n = 9, 2, 40
    press = MaskPress(mask, window=window, sinks=sinks)
    ids = torch.randint(0, 97, (1, n))
    with torch.no_grad(), press(model):
        model(ids, past_key_values=transformers.DynamicCache(config=cfg))
    for layer, block in enumerate(model.model.layers):
        got = set()
        if block.self_attn.masked_key_indices is not None:
            b, h, j = (t.tolist() for t in block.self_attn.masked_key_indices)
            got = set(zip(b, h, j))
        # Masked: an SWA head's keys after its sinks and before the last window - 1 positions.
        want = {(0, h, j) for h in range(3) if mask[layer, h] for j in range(sinks, n - (window - 1))}
        assert got == want, layer
