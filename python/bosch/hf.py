# SPDX-License-Identifier: Apache-2.0
"""bosch.hf: a head mask in Hugging Face transformers, per KV head.

No upstream transformers model takes a sliding window per KV head (the
configurations take them per layer: docs/deployment.md), so this module runs
a bosch head mask through an attention function of its own, registered with
transformers' ``AttentionInterface``, and a KV cache that frees what the SWA
heads no longer read::

    import bosch, bosch.hf

    f = bosch.read_mask("mask.json")                      # window and sinks in its metadata
    attention = bosch.hf.WindowedAttention.from_mask(f)
    tokenizer, model = bosch.hf.load_model("HuggingFaceTB/SmolLM2-135M-Instruct", attention)
    logits = model(ids).logits                            # the masked model (scoring, prefill)
    out = model.generate(ids, past_key_values=attention.new_cache(), max_new_tokens=64)

The window rule is the one of bosch's own forward (and of its C++
evaluator): a query of an SWA head at position i sees the keys j with
i - window < j <= i, plus the keys j < sinks; a full head sees every j <= i.
The attention runs through FlexAttention with a block mask built from that
rule (bosch.flex): compiled, it skips the key tiles an SWA head never reads,
takes grouped-query attention without copying keys, and never builds a
(heads, queries, keys) mask, on the CPU and on GPUs alike; ``backend="dense"``
is the plain masked SDPA it is checked against. Sequences run unpadded or
right-padded (key j at position j); left padding is refused.
``attention.new_cache()`` (bosch.hybrid_cache) keeps each SWA head's sinks
and a ring of its last ``window`` positions and each full head's every
position, as bosch's own decode does.

``window_mask`` and ``make_passkey_samples`` are array code that needs only
NumPy; everything that runs a model imports torch and transformers when it is
called (``import bosch.hf`` does not), and says so with an ImportError
naming the package when it is missing.
"""

import importlib

import numpy as np

#: The name under which ``WindowedAttention.register`` registers the function.
ATTENTION_NAME = "bosch_windows"

_INSTALL = 'pip install torch "transformers>=4.48"'


def _require(module, what):
    """Import `module` for `what`, or an ImportError that names the package."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        top = module.split(".")[0]
        raise ImportError(f"bosch.hf: {what} needs {top}, which is not installed ({_INSTALL}); "
                          f"the rest of bosch does not need it") from e


def window_mask(swa_kv, num_query_heads, q_positions, k_positions, window, sinks=0):
    """Which keys each query head may attend to.

    swa_kv: bool (kv_heads,), True = that KV head uses a sliding window.
    q_positions: (q,) positions of the queries; k_positions: (k,) of the keys.
    Returns bool (num_query_heads, q, k): query head h at q_positions[i] sees
    the key at k_positions[j] iff it is not in the future and, for an SWA head
    (KV head h // (num_query_heads // kv_heads)), it is one of the last
    `window` positions or one of the first `sinks`.
    Works for NumPy arrays and torch tensors alike (only indexing, broadcasting
    and comparisons).
    """
    kv_heads = swa_kv.shape[0]
    if kv_heads == 0 or num_query_heads % kv_heads != 0:
        raise ValueError(f"{num_query_heads} query heads do not divide into {kv_heads} KV heads")
    group = num_query_heads // kv_heads
    head_to_kv = [h // group for h in range(num_query_heads)]
    swa_q = swa_kv[head_to_kv][:, None, None]  # (Hq, 1, 1)
    delta = q_positions[:, None] - k_positions[None, :]  # (q, k): how far back the key is
    causal = delta >= 0
    local = (delta < window) | (k_positions[None, :] < sinks)
    return causal & (local | ~swa_q)


BACKENDS = ("flex", "dense")


class WindowedAttention:
    """A transformers attention function that applies a bosch head mask.

    window, sinks: the SWA heads' window (counting the query itself, >= 1) and
    attention sinks (>= 0), as in the mask file's metadata.
    mask: the head mask, bool (layers, kv_heads), True = sliding window; set
    it (or assign ``.mask``) before running the model; all-False is the
    unmasked model.
    backend: "flex" (FlexAttention with a block mask: memory linear in the
    context for SWA heads) or "dense" (SDPA with a dense boolean mask and
    keys repeated over the query heads: the reference, short inputs only).
    compile: compile the FlexAttention kernel (block-sparse); False runs it
    eagerly (dense scores; for checking). Where compiling fails it falls
    back to eager with a RuntimeWarning that says why.
    """

    def __init__(self, window, sinks=0, mask=None, backend="flex", compile=True):
        if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1:
            raise ValueError(f"window must be an integer >= 1, got {window!r}")
        if isinstance(sinks, bool) or not isinstance(sinks, (int, np.integer)) or sinks < 0:
            raise ValueError(f"sinks must be an integer >= 0, got {sinks!r}")
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
        self.window, self.sinks = int(window), int(sinks)
        self.backend, self.compile = backend, bool(compile)
        self._mask = None
        self._on_device = {}
        if mask is not None:
            self.mask = mask

    @classmethod
    def from_mask(cls, mask_file, **kwargs):
        """The attention of a mask file (bosch.read_mask's result, or a
        path): its mask, and the window and sinks of its metadata."""
        from . import read_mask

        f = read_mask(mask_file) if not hasattr(mask_file, "mask") else mask_file
        meta = getattr(f, "metadata", None) or {}
        if "window" not in meta:
            raise ValueError("the mask file's metadata records no window: use WindowedAttention(window, sinks, mask)")
        return cls(meta["window"], meta.get("sinks", 0), mask=f.mask, **kwargs)

    def new_cache(self, capacity=0):
        """A hybrid KV cache for this attention's current mask
        (bosch.hybrid_cache.HybridCache): pass it as ``past_key_values``.
        capacity: positions to allocate for the full heads at once, for
        example prompt + max_new_tokens - 1 (outgrown, it grows by a
        quarter)."""
        if self._mask is None:
            raise RuntimeError("bosch.hf.WindowedAttention: no head mask set (assign .mask before new_cache)")
        _require("transformers", "the hybrid KV cache")
        from .hybrid_cache import HybridCache

        return HybridCache(self._mask, self.window, self.sinks, capacity)

    @property
    def mask(self):
        """The head mask, a (layers, kv_heads) bool NumPy array (None until set)."""
        return self._mask

    @mask.setter
    def mask(self, mask):
        m = np.asarray(mask.cpu() if hasattr(mask, "cpu") else mask)
        if m.ndim != 2 or m.size == 0:
            raise ValueError(f"the head mask must be a non-empty (layers, kv_heads) array, got shape {m.shape}")
        if m.dtype != np.bool_:
            if not np.isin(m, (0, 1)).all():
                raise ValueError("the head mask must hold booleans (True = sliding window)")
            m = m.astype(bool)
        self._mask = m.copy()
        self._on_device = {}

    def __call__(self, module, query, key, value, attention_mask=None, dropout=0.0, scaling=None, **kwargs):
        """Scaled-dot-product attention with the current mask's windows for
        layer ``module.layer_idx``. query: (b, Hq, q, d); key, value:
        (b, Hkv, k, d). The parameters are in the order of transformers' own
        attention functions (dropout before scaling), which wrappers such as
        kvpress's attention patch pass positionally. Returns
        (output (b, q, Hq, d), None), as those functions do."""
        torch = _require("torch", "the attention function")
        if self._mask is None:
            raise RuntimeError("bosch.hf.WindowedAttention: no head mask set (assign .mask before running)")
        layer = module.layer_idx
        layers, kv_heads = self._mask.shape
        if not 0 <= layer < layers:
            raise ValueError(f"attention layer {layer} is outside the head mask's {layers} layers")
        if key.shape[1] != kv_heads or query.shape[1] % kv_heads != 0:
            raise ValueError(f"layer {layer} has {query.shape[1]} query and {key.shape[1]} KV heads; "
                             f"the head mask has {kv_heads} KV heads per layer")
        swa = self._on_device.get(query.device)
        if swa is None:
            swa = self._on_device[query.device] = torch.as_tensor(self._mask, device=query.device)
        from .hybrid_cache import HybridStep  # noqa: imports transformers, which is running this

        if isinstance(key, HybridStep):  # a step of the hybrid KV cache
            if self.backend != "flex":
                raise ValueError("the hybrid KV cache runs with backend='flex'")
            out = key.layer.attend(query, key, scaling, self.compile)
            return out.transpose(1, 2).contiguous(), None
        group = query.shape[1] // key.shape[1]
        if self.backend == "flex":
            from . import flex

            swa_q = swa[layer].repeat_interleave(group)
            out = flex.attention(query, key, value, swa_q, self.window, self.sinks, scaling, self.compile)
            return out.transpose(1, 2).contiguous(), None
        q_len, k_len = query.shape[-2], key.shape[-2]
        k_pos = torch.arange(k_len, device=query.device)
        q_pos = k_pos[k_len - q_len:]
        allowed = window_mask(swa[layer], query.shape[1], q_pos, k_pos, self.window, self.sinks)
        key = key.repeat_interleave(group, dim=1)
        value = value.repeat_interleave(group, dim=1)
        out = torch.nn.functional.scaled_dot_product_attention(
            query, key, value, attn_mask=allowed[None], dropout_p=0.0, scale=scaling
        )
        return out.transpose(1, 2).contiguous(), None

    def register(self, name=ATTENTION_NAME):
        """Register this function with transformers' AttentionInterface (and,
        on transformers >= 4.53, the mask builder that goes with it) under
        `name`; load a model with ``attn_implementation=name``. Returns name."""
        interface = _require("transformers", "registering the attention function").AttentionInterface
        interface.register(name, self)
        try:  # transformers >= 4.53 also asks which mask builder goes with an implementation
            from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS

            ALL_MASK_ATTENTION_FUNCTIONS.register(name, _no_mask)
        except ImportError:
            pass
        return name


def _no_mask(batch_size, cache_position, kv_length, kv_offset=0, mask_function=None, attention_mask=None, **kwargs):
    """The mask builder registered with the attention: none is built (the
    windows are the attention's own); the padding mask is only checked. Right
    padding leaves the real tokens' outputs unchanged in a causal model; left
    padding shifts positions, and is refused."""
    if attention_mask is not None and attention_mask.dim() == 2 and not bool(attention_mask.all()):
        m = attention_mask.bool()
        if bool((m[:, 1:] & ~m[:, :-1]).any()):  # a token after a padding position
            raise ValueError("bosch.hf: left (or inner) padding is not supported: key j must sit at position j; "
                             "pad on the right (tokenizer.padding_side = 'right') or run sequences one by one")
    return None


def load_model(model, attention, gguf_file=None, device="cpu", name=ATTENTION_NAME, with_tokenizer=True):
    """(tokenizer, model) of a Hugging Face causal LM in float32 on `device`,
    evaluation mode, with `attention` (a WindowedAttention) registered as
    `name` and used by every attention layer. model: a hub name or a
    directory; gguf_file: a GGUF file in that directory, which transformers
    dequantizes (bosch reads the same file). with_tokenizer=False: the
    tokenizer is None (a model directory without one)."""
    torch = _require("torch", "load_model")
    transformers = _require("transformers", "load_model")
    attention.register(name)
    extra = {} if gguf_file is None else {"gguf_file": gguf_file}
    version = tuple(int(p) for p in transformers.__version__.split(".")[:2] if p.isdigit())
    dtype_key = "dtype" if version >= (4, 56) else "torch_dtype"  # torch_dtype is deprecated from 4.56
    tokenizer = transformers.AutoTokenizer.from_pretrained(model, **extra) if with_tokenizer else None
    lm = transformers.AutoModelForCausalLM.from_pretrained(
        model, attn_implementation=name, **{dtype_key: torch.float32}, **extra
    ).to(device).eval()
    return tokenizer, lm


def make_passkey_samples(tokenizer, context, samples, seed):
    """Passkey retrieval: a number hidden at a random depth of filler text,
    asked for at the end. Returns (prompt token ids, answer token ids) pairs of
    about `context` tokens. tokenizer: a callable returning ``.input_ids``
    (a transformers tokenizer)."""
    rng = np.random.default_rng(seed)
    filler = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. "
    out = []
    for _ in range(samples):
        key = str(rng.integers(10000, 99999))
        needle = f"The pass key is {key}. Remember it. {key} is the pass key. "
        question = "What is the pass key? The pass key is"
        n = max(1, (context - 40) // max(1, len(tokenizer(filler).input_ids)))
        depth = int(rng.integers(0, n + 1))
        text = filler * depth + needle + filler * (n - depth) + question
        out.append((tokenizer(text).input_ids, tokenizer(" " + key, add_special_tokens=False).input_ids))
    return out


class HFEvaluator:
    """Scores head masks with a Hugging Face causal LM, for ``bosch.select``:
    the mean over samples of the mean log-probability of the answer tokens
    (teacher-forced; a continuous score, higher is better), the score of
    bosch's own evaluator.

    The samples are, in order of preference: ``tasks``, a list of
    ``{"prompt": ids, "answer": ids}`` dicts or (prompt, answer) pairs (for
    example ``bosch.TransformerEvaluator(...).samples()``, the samples bosch's
    C++ evaluator scores: see ``HFEvaluator.like``), else `samples` passkey
    samples of about `context` tokens (make_passkey_samples).

    batch_size: samples run together, right-padded to the longest (a padded
    causal model's real tokens are unchanged); more helps on a GPU. Only the
    answer rows go through the output projection.

    model_name: a hub name or a directory (loaded by load_model), or your
    own causal LM already loaded (a torch module; then give ``tasks``): its
    attention is switched to the windowed one.

    It races (``bosch.select(..., race=True)``) as bosch's C++ evaluator does:
    ``score_samples(mask, samples)`` scores any subset of the samples,
    ``race_order()`` interleaves the tasks (the C++ evaluator's own order
    under ``like``), ``reduce(scores)`` is the mean (evaluate()'s exact
    arithmetic), and ``cost()`` counts sample forwards (Result.forwards), so
    a search's cost reads as the C++ one's does.
    """

    def __init__(self, model_name, window, sinks=0, context=512, samples=4, device=None, seed=0, gguf_file=None,
                 tasks=None, batch_size=1, backend="flex", compile=True, race_order=None):
        torch = _require("torch", "HFEvaluator")
        from ._bosch import HeadLayout

        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        self.torch = torch
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.batch_size = int(batch_size)
        self.attention = WindowedAttention(window, sinks, backend=backend, compile=compile)
        if isinstance(model_name, torch.nn.Module):  # the user's own model, already loaded
            if gguf_file is not None:
                raise ValueError("gguf_file: give a model directory or name, not a loaded model, with a GGUF file")
            self.attention.register()
            self.model = model_name.to(self.device).eval()
            self.model.set_attn_implementation(ATTENTION_NAME)
            self.tokenizer = None
        else:
            self.tokenizer, self.model = load_model(model_name, self.attention, gguf_file=gguf_file,
                                                    device=self.device, with_tokenizer=tasks is None)
        if tasks is None and self.tokenizer is None:
            raise ValueError("tasks: a loaded model comes without its tokenizer; give tasks (token ids)")
        cfg = self.model.config
        kv_heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
        self.layout = HeadLayout(cfg.num_hidden_layers, cfg.num_attention_heads, kv_heads)
        if tasks is None:
            self.samples = make_passkey_samples(self.tokenizer, context, samples, seed)
        else:
            self.samples = [_sample_pair(t, i) for i, t in enumerate(tasks)]
            if not self.samples:
                raise ValueError("tasks holds no sample")
        self._order = _interleaved(tasks, len(self.samples)) if race_order is None else _checked_order(race_order, len(self.samples))
        self.forwards = 0  # sample forwards run so far

    @classmethod
    def like(cls, evaluator, model_name, gguf_file=None, split="calibration", **kwargs):
        """An HFEvaluator on the samples, window and sinks of a
        bosch.TransformerEvaluator (of the same model): its scores are the
        ones bosch's C++ forward gives, up to the two runtimes' arithmetic."""
        order = evaluator.race_order() if split == "calibration" else None
        return cls(model_name, evaluator.window, evaluator.sinks, gguf_file=gguf_file,
                   tasks=evaluator.samples(split), race_order=order, **kwargs)

    @property
    def window(self):
        return self.attention.window

    @property
    def sinks(self):
        return self.attention.sinks

    def sample_scores(self, mask):
        """Mean answer log-probability of each sample, in order (float64 array)."""
        return self.score_samples(mask, range(len(self.samples)))

    def score_samples(self, mask, samples):
        """Mean answer log-probability of the samples with the given indices,
        in that order (float64 array); a sample's score does not depend on
        which others are asked for with it when batch_size is 1."""
        torch = self.torch
        idx = [int(i) for i in samples]
        for i in idx:
            if not 0 <= i < len(self.samples):
                raise IndexError(f"sample {i} is not within the {len(self.samples)} samples")
        self.attention.mask = mask
        out = []
        with torch.no_grad():
            for first in range(0, len(idx), self.batch_size):
                batch = [self.samples[i] for i in idx[first:first + self.batch_size]]
                seqs = [p + a for p, a in batch]
                n = max(len(x) for x in seqs)
                ids = torch.zeros((len(seqs), n), dtype=torch.long)
                for r, x in enumerate(seqs):
                    ids[r, :len(x)] = torch.tensor(x)
                lo = min(len(p) for p, _ in batch) - 1  # first answer row over the batch
                hi = max(len(p) + len(a) for p, a in batch) - 1
                logits = self.model(ids.to(self.device), logits_to_keep=torch.arange(lo, hi)).logits
                logp = torch.log_softmax(logits.float(), dim=-1)
                for r, (p, a) in enumerate(batch):
                    rows = torch.arange(len(p) - 1, len(p) - 1 + len(a)) - lo
                    out.append(logp[r, rows.to(logp.device), torch.tensor(a, device=logp.device)].double().mean().item())
                self.forwards += len(batch)
        return np.array(out, dtype=np.float64)

    def sample_count(self):
        return len(self.samples)

    def race_order(self):
        """The order in which a race scores the samples: the tasks interleaved."""
        return list(self._order)

    @staticmethod
    def reduce(scores):
        """The score from all per-sample scores in sample order: their sum,
        accumulated in order, over their count (bosch's C++ arithmetic)."""
        total = 0.0
        for v in scores:
            total += float(v)
        return total / len(scores) if len(scores) else 0.0

    def cost(self):
        """Sample forwards run so far (each a whole forward: no residual cache)."""
        return float(self.forwards)

    def evaluate(self, mask):
        """Mean over samples of the mean log-probability of the answer tokens."""
        return self.reduce(self.sample_scores(mask))

    __call__ = evaluate


def _interleaved(tasks, n):
    """The n sample indices with the tasks interleaved (every task's first
    sample, then every task's second, ...), tasks named by a dict's "task"
    key; in order without names."""
    if tasks is None or not all(isinstance(t, dict) and "task" in t for t in tasks):
        return list(range(n))
    queues = {}
    for i, t in enumerate(tasks):
        queues.setdefault(t["task"], []).append(i)
    out, rounds = [], max(len(q) for q in queues.values())
    for r in range(rounds):
        out.extend(q[r] for q in queues.values() if r < len(q))
    return out


def _checked_order(order, n):
    out = [int(i) for i in order]
    if sorted(out) != list(range(n)):
        raise ValueError(f"race_order must be a permutation of the {n} samples")
    return out


def _sample_pair(t, i):
    if isinstance(t, dict):
        if "prompt" not in t or "answer" not in t:
            raise ValueError(f"tasks[{i}]: a sample needs 'prompt' and 'answer' token ids")
        p, a = t["prompt"], t["answer"]
    else:
        p, a = t
    p, a = [int(x) for x in p], [int(x) for x in a]
    if not p or not a:
        raise ValueError(f"tasks[{i}]: empty {'prompt' if not p else 'answer'}")
    return p, a
