# SPDX-License-Identifier: Apache-2.0
"""One process of test_distributed.py's searches: a small random Llama model
(the same weights in every process), seven token-id samples of three tasks,
bosch.select over a ShardedEvaluator of an HFEvaluator; rank 0 writes the
result as JSON.

    python distributed_worker.py RANK SIZE INIT_FILE OUT.json RATIO
"""

import json
import sys

import numpy as np
import torch
import torch.distributed as dist
import transformers

import bosch
import bosch.hf
from bosch.distributed import ShardedEvaluator


def main():
    rank, size, init, out, ratio = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], float(sys.argv[5])
    torch.set_num_threads(1)  # a sample's score must not depend on the process that computes it
    dist.init_process_group("gloo", init_method=f"file://{init}", rank=rank, world_size=size)
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=97, hidden_size=48, intermediate_size=64, num_hidden_layers=4,
                                   num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=512,
                                   eos_token_id=None, bos_token_id=None)
    model = transformers.LlamaForCausalLM(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(8.0 if p.dim() == 2 else 1.0)
    rng = np.random.default_rng(0)
    tasks = [{"task": f"t{i % 3}", "prompt": rng.integers(0, 97, 60).tolist(), "answer": rng.integers(0, 97, 3).tolist()}
             for i in range(7)]
    inner = bosch.hf.HFEvaluator(model, 8, 1, tasks=tasks, backend="flex", compile=False)
    evaluator = ShardedEvaluator(inner)
    result = bosch.select(evaluator, None, ratio, seed=5, race=True, race_min_samples=2)
    if rank == 0:
        bits = lambda m: "".join("1" if b else "0" for b in np.asarray(m).ravel())  # noqa: E731
        with open(out, "w") as f:
            json.dump({"mask": bits(result.mask), "score": result.score, "eliminated": result.eliminated,
                       "forwards": result.forwards, "own_forwards": inner.cost(),
                       "log": [[e.index, e.stage, bits(e.mask), e.score, e.eliminated, e.samples] for e in result.log]},
                      f)
    # Every process leaves the group together: gloo aborts a process
    # ("terminate called without an active exception") whose peer tears
    # the group down while it is still on its way out.
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
