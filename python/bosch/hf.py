# SPDX-License-Identifier: Apache-2.0
"""bosch.hf: a head mask in Hugging Face transformers, per KV head.

No upstream transformers model takes a sliding window per KV head (the
configurations take them per layer: docs/deployment.md), so this module runs
a bosch head mask through an attention function of its own, registered with
transformers' ``AttentionInterface``::

    import bosch, bosch.hf

    attention = bosch.hf.WindowedAttention(window=64, sinks=4)
    tokenizer, model = bosch.hf.load_model("HuggingFaceTB/SmolLM2-135M-Instruct", attention)
    attention.mask = bosch.read_mask("mask.json").mask   # (layers, kv_heads), True = SWA
    logits = model(ids).logits                           # the masked model

The window rule is the one of bosch's own forward (and of its C++
evaluator): a query of an SWA head at position i sees the keys j with
i - window < j <= i, plus the keys j < sinks; a full head sees every j <= i.
The model runs one unpadded sequence at a time, without a KV cache that drops
keys (key j is at position j); the attention mask transformers passes in is
not used (the causal part is in ``window_mask``). scripts/check-hf checks
that this gives bosch's log-probabilities for SmolLM2 within 5e-4 nats.

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


class WindowedAttention:
    """A transformers attention function that applies a bosch head mask.

    window, sinks: the SWA heads' window (counting the query itself, >= 1) and
    attention sinks (>= 0), as in the mask file's metadata.
    mask: the head mask, bool (layers, kv_heads), True = sliding window; set
    it (or assign ``.mask``) before running the model; all-False is the
    unmasked model.
    """

    def __init__(self, window, sinks=0, mask=None):
        if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1:
            raise ValueError(f"window must be an integer >= 1, got {window!r}")
        if isinstance(sinks, bool) or not isinstance(sinks, (int, np.integer)) or sinks < 0:
            raise ValueError(f"sinks must be an integer >= 0, got {sinks!r}")
        self.window, self.sinks = int(window), int(sinks)
        self._mask = None
        self._on_device = {}
        if mask is not None:
            self.mask = mask

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
        q_len, k_len = query.shape[-2], key.shape[-2]
        k_pos = torch.arange(k_len, device=query.device)
        q_pos = k_pos[k_len - q_len:]
        allowed = window_mask(swa[layer], query.shape[1], q_pos, k_pos, self.window, self.sinks)
        group = query.shape[1] // key.shape[1]
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
            from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

            ALL_MASK_ATTENTION_FUNCTIONS.register(name, sdpa_mask)
        except ImportError:
            pass
        return name


def load_model(model, attention, gguf_file=None, device="cpu", name=ATTENTION_NAME):
    """(tokenizer, model) of a Hugging Face causal LM in float32 on `device`,
    evaluation mode, with `attention` (a WindowedAttention) registered as
    `name` and used by every attention layer. model: a hub name or a
    directory; gguf_file: a GGUF file in that directory, which transformers
    dequantizes (bosch reads the same file)."""
    torch = _require("torch", "load_model")
    transformers = _require("transformers", "load_model")
    attention.register(name)
    extra = {} if gguf_file is None else {"gguf_file": gguf_file}
    version = tuple(int(p) for p in transformers.__version__.split(".")[:2] if p.isdigit())
    dtype_key = "dtype" if version >= (4, 56) else "torch_dtype"  # torch_dtype is deprecated from 4.56
    tokenizer = transformers.AutoTokenizer.from_pretrained(model, **extra)
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
    """Scores head masks with a Hugging Face causal LM: the mean over
    passkey samples of the mean log-probability of the answer tokens (a
    continuous score, higher is better), for ``bosch.select``."""

    def __init__(self, model_name, window, sinks=0, context=512, samples=4, device=None, seed=0, gguf_file=None):
        torch = _require("torch", "HFEvaluator")
        from ._bosch import HeadLayout

        self.torch = torch
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.attention = WindowedAttention(window, sinks)
        self.tokenizer, self.model = load_model(model_name, self.attention, gguf_file=gguf_file, device=self.device)
        cfg = self.model.config
        kv_heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
        self.layout = HeadLayout(cfg.num_hidden_layers, cfg.num_attention_heads, kv_heads)
        self.samples = make_passkey_samples(self.tokenizer, context, samples, seed)

    @property
    def window(self):
        return self.attention.window

    @property
    def sinks(self):
        return self.attention.sinks

    def evaluate(self, mask):
        """Mean over samples of the mean log-probability of the answer tokens."""
        torch = self.torch
        self.attention.mask = mask
        total = 0.0
        with torch.no_grad():
            for prompt_ids, answer_ids in self.samples:
                ids = torch.tensor([prompt_ids + answer_ids], device=self.device)
                logits = self.model(ids).logits[0, len(prompt_ids) - 1:-1].float()
                logp = torch.log_softmax(logits, dim=-1)
                total += logp[torch.arange(len(answer_ids)), torch.tensor(answer_ids)].mean().item()
        return total / len(self.samples)
