# SPDX-License-Identifier: Apache-2.0
"""bosch.hybrid_cache: a transformers KV cache that holds what a bosch mask
says each KV head needs, for ``model.generate``.

Per layer and KV head (the layout of bosch's own decode, docs/deployment.md):

- a full head keeps the keys and values of every position (a buffer that
  grows by a quarter when the context outgrows it);
- an SWA head keeps its ``sinks`` first positions and a ring of its last
  ``window`` positions: position j >= sinks lives in slot
  sinks + (j - sinks) mod window.

So the bytes held are 2 x d x itemsize x batch x (T per full head + sinks +
window per SWA head), ``HybridCache.bytes()``, against 2 x d x itemsize x
batch x T per head for transformers' DynamicCache.

The cache works with bosch.hf.WindowedAttention, which it is made from
(``attention.new_cache()``): ``update`` hands the attention function a
``HybridStep`` instead of the keys, and the attention reads the head groups
from the cache. The prompt runs through the block-sparse forward with the
mask's windows (what bosch scores); each later step attends a full head's
whole buffer and an SWA head's sinks and ring.
"""

import torch
from transformers.cache_utils import Cache, CacheLayerMixin

from . import flex


class HybridStep:
    """What HybridCache.update returns in place of the keys: the new rows,
    their first position and the layer that will store them."""

    __slots__ = ("layer", "keys", "values", "start")

    def __init__(self, layer, keys, values, start):
        self.layer, self.keys, self.values, self.start = layer, keys, values, start

    @property
    def shape(self):  # for code that only asks how many keys there are
        return (*self.keys.shape[:2], self.start + self.keys.shape[2], self.keys.shape[3])


def _grown(old, end):
    """Rows to grow a buffer of `old` rows to when it must hold `end`: by a
    quarter, at least 256 (amortized copies stay O(T))."""
    return max(end, old + max(256, old // 4))


class HybridLayer(CacheLayerMixin):
    """One layer's cache: full heads in a growing buffer, SWA heads in a ring."""

    is_sliding = False
    is_compileable = False

    def __init__(self, swa_kv, window, sinks, capacity=0):
        super().__init__()
        self.swa_kv = [bool(x) for x in swa_kv]
        self.window, self.sinks, self.capacity = int(window), int(sinks), int(capacity)
        self.seen = 0

    def lazy_initialization(self, key_states, value_states):
        b, kv, _, d = key_states.shape
        if kv != len(self.swa_kv):
            raise ValueError(f"the layer has {kv} KV heads; the head mask has {len(self.swa_kv)}")
        self.dtype, self.device = key_states.dtype, key_states.device
        swa = torch.tensor(self.swa_kv, device=self.device)
        self.full_idx = torch.nonzero(~swa).flatten()
        self.swa_idx = torch.nonzero(swa).flatten()
        nf, ns = len(self.full_idx), len(self.swa_idx)
        new = lambda heads, rows: torch.zeros((b, heads, rows, d), dtype=self.dtype, device=self.device)
        self.full_k, self.full_v = new(nf, self.capacity), new(nf, self.capacity)
        # At most sinks + window slots, fewer while the sequence is shorter
        # (position j < sinks + window sits in slot j; the ring grows with it).
        slots = min(self.sinks + self.window, self.capacity) if ns else 0
        self.ring_k, self.ring_v = new(ns, slots), new(ns, slots)
        self.ring_pos = torch.full((slots,), -1, dtype=torch.long, device=self.device)
        self.keys = self.values = None  # no single (b, heads, T, d) tensor exists
        self.is_initialized = True

    # ---- the cache protocol of transformers
    def update(self, key_states, value_states, cache_kwargs=None):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        return HybridStep(self, key_states, value_states, self.seen), None

    def get_seq_length(self):
        return self.seen

    def get_mask_sizes(self, cache_position):
        return self.seen + cache_position.shape[0], 0

    def get_max_cache_shape(self):
        return -1

    def reset(self):
        self.seen = 0
        if self.is_initialized:
            self.ring_pos.fill_(-1)

    def reorder_cache(self, beam_idx):
        raise NotImplementedError("bosch.hf.HybridCache: beam search is not supported (greedy or sampling only)")

    def bytes(self):
        """Bytes of keys and values this layer holds."""
        if not self.is_initialized:
            return 0
        return sum(t.numel() * t.element_size() for t in (self.full_k, self.full_v, self.ring_k, self.ring_v))

    # ---- storing and attending
    def _store(self, k, v, start):
        q = k.shape[2]
        end = start + q
        if len(self.full_idx):
            if end > self.full_k.shape[2]:
                # Grown by a quarter (at least 256 rows): amortized copies stay
                # O(T), and the rows held past T at most T / 4 (new_cache's
                # capacity avoids both).
                old = self.full_k.shape[2]
                cap = _grown(old, end)
                grow = lambda t: torch.cat([t[:, :, :start], t.new_zeros((*t.shape[:2], cap - start, t.shape[3]))], 2)
                self.full_k, self.full_v = grow(self.full_k), grow(self.full_v)
            self.full_k[:, :, start:end] = k[:, self.full_idx]
            self.full_v[:, :, start:end] = v[:, self.full_idx]
        if len(self.swa_idx):
            s, w = self.sinks, self.window
            if self.ring_k.shape[2] < min(end, s + w):  # grown like the full heads, up to s + w slots
                old = self.ring_k.shape[2]
                cap = min(s + w, _grown(old, end))
                grow = lambda t: torch.cat([t, t.new_zeros((*t.shape[:2], cap - old, t.shape[3]))], 2)
                self.ring_k, self.ring_v = grow(self.ring_k), grow(self.ring_v)
                self.ring_pos = torch.cat([self.ring_pos, self.ring_pos.new_full((cap - old,), -1)])
            pos = torch.arange(start, end, device=self.device)
            keep = (pos < s) | (pos > end - 1 - w)  # sinks, and the last w positions
            pos = pos[keep]
            slots = torch.where(pos < s, pos, s + (pos - s) % w)
            rows = keep.nonzero().flatten()
            ks, vs = k[:, self.swa_idx], v[:, self.swa_idx]
            self.ring_k[:, :, slots] = ks[:, :, rows]
            self.ring_v[:, :, slots] = vs[:, :, rows]
            self.ring_pos[slots] = pos
        self.seen = end

    def _query_heads(self, group):
        """(swa_q, full query heads, SWA query heads) for `group` query heads
        per KV head: computed on the first step, not on every decode step."""
        if getattr(self, "_heads_group", None) != group:
            g = torch.arange(group, device=self.device)
            self._heads = (torch.tensor(self.swa_kv, device=self.device).repeat_interleave(group),
                           (self.full_idx[:, None] * group + g).flatten(),
                           (self.swa_idx[:, None] * group + g).flatten())
            self._heads_group = group
        return self._heads

    def attend(self, query, step, scale, compile=True):
        """Attention of the query heads for step's rows, then stores them.
        query (b, Hq, q, d). Returns (b, Hq, q, d)."""
        b, hq, q, d = query.shape
        group = hq // len(self.swa_kv)
        swa_q, qf, qs = self._query_heads(group)
        start = step.start
        if start == 0:
            # The prompt: the block-sparse forward with the mask's windows,
            # then keep what later steps read.
            out = flex.attention(query, step.keys, step.values, swa_q, self.window, self.sinks, scale, compile)
            self._store(step.keys, step.values, 0)
            return out
        out = query.new_empty(query.shape)
        pos_q = torch.arange(start, start + q, device=query.device)
        if len(self.swa_idx):
            # Before storing: the ring still holds what the chunk's earlier queries see.
            k = torch.cat([self.ring_k, step.keys[:, self.swa_idx]], 2)
            v = torch.cat([self.ring_v, step.values[:, self.swa_idx]], 2)
            pos_k = torch.cat([self.ring_pos, pos_q])
            allowed = ((pos_k[None] >= 0) & (pos_k[None] <= pos_q[:, None])
                       & ((pos_q[:, None] - pos_k[None] < self.window) | (pos_k[None] < self.sinks)))
            out[:, qs] = torch.nn.functional.scaled_dot_product_attention(
                query[:, qs], k, v, attn_mask=allowed, scale=scale, enable_gqa=group > 1)
        self._store(step.keys, step.values, start)
        if len(self.full_idx):
            k, v = self.full_k[:, :, :start + q], self.full_v[:, :, :start + q]
            if q == 1:
                o = torch.nn.functional.scaled_dot_product_attention(query[:, qf], k, v, scale=scale,
                                                                     enable_gqa=group > 1)
            else:  # a later chunk of several tokens: causal within it
                o = flex.attention(query[:, qf].contiguous(), k, v, torch.zeros(len(qf), dtype=torch.bool,
                                   device=query.device), 1, 0, scale, compile, q_start=start)
            out[:, qf] = o
        return out


class HybridCache(Cache):
    """The hybrid KV cache of a bosch head mask (see the module's text).
    Made by ``bosch.hf.WindowedAttention.new_cache(capacity)``; pass it as
    ``past_key_values`` to ``model.generate`` or to the model's forward."""

    def __init__(self, mask, window, sinks, capacity=0):
        super().__init__(layers=[HybridLayer(row, window, sinks, capacity) for row in mask])
        self.window, self.sinks = int(window), int(sinks)

    def bytes(self):
        """Bytes of keys and values held, summed over layers."""
        return sum(layer.bytes() for layer in self.layers)

    def crop(self, max_length):
        raise NotImplementedError("bosch.hf.HybridCache cannot be cropped (an SWA head's ring has dropped old keys)")


def dense_cache_bytes(model_config, batch, tokens, dtype):
    """What transformers' DynamicCache holds for the same model: every KV
    head keeps every position."""
    cfg = model_config
    kv = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    d = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    return 2 * cfg.num_hidden_layers * kv * d * batch * tokens * torch.empty((), dtype=dtype).element_size()
