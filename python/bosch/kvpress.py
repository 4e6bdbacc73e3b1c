# SPDX-License-Identifier: Apache-2.0
"""bosch.kvpress: a bosch head mask as a kvpress press, in one line::

    from bosch.kvpress import MaskPress

    press = MaskPress("mask.json")          # or an exported pattern directory
    with press(model):                      # any model kvpress runs
        outputs = model(input_ids, past_key_values=cache)

MaskPress is kvpress's DuoAttentionPress with the pattern taken from the mask
(no download, any model): the mask's SWA KV heads are its streaming heads,
every other head a retrieval head.

What kvpress does with it (docs/pytorch.md): the prompt is prefilled with
full attention in every head; only then are a streaming head's keys between
its sinks and its last ``recent_size`` prompt positions masked out of later
attention. The cache keeps every key (kvpress masks, it frees nothing), the
prompt's own positions never see the windows, and tokens generated later
are never dropped. For the windows bosch scored, in prefill and in the
cache, use bosch.hf (``WindowedAttention`` and ``new_cache()``).

Window and recent size: a bosch window w counts the query itself, as
DuoAttention's recent_size does (a pattern directory from ``bosch convert
--to kvpress`` records recent_size = w). kvpress keeps the last recent_size
prompt keys and the query sees itself besides them, one more; MaskPress
therefore sets kvpress's ``recent_size = w - 1``, from a mask file and from
a pattern directory alike, so that the first token after the prompt sees
exactly the keys bosch's window gives it.
"""

import json
import pathlib
import numpy as np
import torch
from kvpress import DuoAttentionPress


def _load(source, window, sinks):
    """(mask bool (layers, kv_heads), sink_size, recent_size) from a mask
    file, a MaskFile, a pattern directory or an array with window/sinks."""
    if isinstance(source, (str, pathlib.Path)) and pathlib.Path(source).is_dir():
        d = pathlib.Path(source)
        cfg = json.loads((d / "config.json").read_text())
        scores = np.clip(np.loadtxt(d / "full_attention_heads.tsv", delimiter="\t", ndmin=2), 0, 1)
        ratio = cfg.get("head_compression_ratio")
        if ratio is None:
            raise ValueError(f"{d}/config.json: no head_compression_ratio (not a bosch pattern directory)")
        n = round(scores.size * ratio)
        mask = np.zeros(scores.size, bool)
        mask[np.argsort(scores, axis=None, kind="stable")[:n]] = True  # kvpress's own rule
        window = int(cfg["recent_size"])
        if window < 2:
            raise ValueError(f"{d}/config.json: recent_size {window}: kvpress keeps at least one recent key "
                             "besides the query (window >= 2)")
        return mask.reshape(scores.shape), int(cfg["sink_size"]), window - 1
    if isinstance(source, (str, pathlib.Path)):
        from . import read_mask

        source = read_mask(source)
    meta = getattr(source, "metadata", None) or {}
    mask = np.asarray(source.mask if hasattr(source, "mask") else source)
    if mask.ndim != 2 or mask.size == 0:
        raise ValueError(f"the head mask must be a non-empty (layers, kv_heads) array, got shape {mask.shape}")
    w = window if window is not None else meta.get("window")
    s = sinks if sinks is not None else meta.get("sinks", 0)
    if w is None:
        raise ValueError("no window: the mask's metadata records none; pass window=")
    if int(w) < 2:
        raise ValueError(f"window {w}: kvpress keeps at least one recent key besides the query (window >= 2)")
    return mask.astype(bool), int(s), int(w) - 1


class MaskPress(DuoAttentionPress):
    """DuoAttentionPress with a bosch mask's SWA heads as streaming heads.

    mask: a mask file path, a bosch.MaskFile, a pattern directory written
    by ``bosch convert --to kvpress``, or a (layers, kv_heads) bool array
    (then pass window, and sinks if any). window, sinks: override the mask
    file's metadata.
    """

    def __init__(self, mask=None, window=None, sinks=None):
        if mask is None:
            raise ValueError("MaskPress needs a mask (a mask file, a pattern directory or an array)")
        swa, self._sinks, self._recent = _load(mask, window, sinks)
        super().__init__(head_compression_ratio=float(swa.mean()), on_the_fly_scoring=False)
        self.swa = swa

    def post_init_from_model(self, model):
        cfg = model.config
        cfg = getattr(cfg, "text_config", cfg)
        kv = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
        if self.swa.shape != (cfg.num_hidden_layers, kv):
            raise ValueError(f"the mask has {self.swa.shape[0]} layers x {self.swa.shape[1]} KV heads; the model "
                             f"has {cfg.num_hidden_layers} x {kv}")
        self.sink_size, self.recent_size = self._sinks, self._recent
        self.streaming_mask = torch.tensor(self.swa, dtype=torch.bool, device=model.device)
