# SPDX-License-Identifier: Apache-2.0
"""One search over several processes (one per GPU, or per CPU socket) with
torch.distributed: every process runs the same ``bosch.select`` on its own
``ShardedEvaluator``, which scores only its share of the samples and gathers
the others' per-sample scores, so every process sees every score and takes
the same decisions. The mask, the scores and the log do not depend on the
number of processes (the C++ counterpart is bosch::mpi::ParallelEvaluator,
docs/mpi.md)::

    import torch.distributed as dist, bosch, bosch.hf
    from bosch.distributed import ShardedEvaluator

    dist.init_process_group("gloo")            # or "nccl"; torchrun sets the rest
    device = f"cuda:{dist.get_rank()}" if torch.cuda.is_available() else "cpu"
    inner = bosch.hf.HFEvaluator(model, 1024, 4, tasks=samples, device=device)
    first = dist.get_rank() == 0
    result = bosch.select(ShardedEvaluator(inner), None, 0.5, seed=1, race=True,
                          log="search.jsonl" if first else None)
    dist.barrier()                             # leave together (gloo aborts a
    dist.destroy_process_group()               # process whose peer left first)

Only one process should write the log (rank 0 above). A checkpoint is per
process: to resume, every process resumes its own (for example
``checkpoint=f"search.{rank}.ckpt"``); one process replaying while the others
score would wait forever.
"""

import hashlib

import numpy as np

__all__ = ["ShardedEvaluator", "share"]


def share(n, parts, i):
    """The contiguous share [begin, end) of part i when n items are split into
    `parts` parts, the first n mod parts parts one item more (the split of
    bosch::mpi::share)."""
    q, r = divmod(n, parts)
    begin = i * q + min(i, r)
    return begin, begin + q + (1 if i < r else 0)


class ShardedEvaluator:
    """A per-sample evaluator (``sample_count``, ``race_order``,
    ``score_samples``, ``reduce``: bosch.hf.HFEvaluator has them) spread over
    the processes of a torch.distributed group.

    Each process scores the samples of its contiguous share that a call asks
    for; the per-sample scores are all-gathered and returned in the order
    asked, so ``reduce`` sees exactly what one process would compute. That
    holds bit for bit when a sample's score does not depend on the process
    that computes it: the same device type, dtype and thread count
    everywhere, and ``batch_size=1`` (a batch's padding depends on its
    neighbours). ``race_block()`` is the process count (a race under way gives
    every process a sample per call); ``cost()`` is the whole group's work.

    Every scoring call is collective: every process must run the same search
    (same options, seed and samples). A process that asks for another mask
    or other samples is caught at the next call, on every process, with
    RuntimeError.
    """

    def __init__(self, evaluator, group=None):
        import torch.distributed as dist

        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError("bosch.distributed: call torch.distributed.init_process_group first")
        missing = [m for m in ("sample_count", "race_order", "score_samples", "reduce") if not hasattr(evaluator, m)]
        if missing:
            raise TypeError(f"bosch.distributed: the evaluator has no {', '.join(missing)} "
                            "(a per-sample evaluator, such as bosch.hf.HFEvaluator, is needed)")
        self._dist, self._group, self.inner = dist, group, evaluator
        self.rank, self.size = dist.get_rank(group), dist.get_world_size(group)
        self._n = int(evaluator.sample_count())
        self.begin, self.end = share(self._n, self.size, self.rank)
        self._cost = 0.0
        self._calls = 0

    @property
    def layout(self):
        """The inner evaluator's layout, as it gives it (AttributeError when it has none)."""
        return self.inner.layout

    def sample_count(self):
        return self._n

    def race_order(self):
        return self.inner.race_order()

    def reduce(self, scores):
        return self.inner.reduce(scores)

    def race_block(self):
        return self.size

    def cost(self):
        """Sample forwards of every process so far (the inner evaluator's
        cost() summed; the count of samples scored without one)."""
        return self._cost

    def score_samples(self, mask, samples):
        samples = [int(s) for s in samples]
        mine = [s for s in samples if self.begin <= s < self.end]
        has_cost = hasattr(self.inner, "cost")
        before = float(self.inner.cost()) if has_cost else 0.0
        scores = [float(v) for v in self.inner.score_samples(mask, mine)] if mine else []
        work = float(self.inner.cost()) - before if has_cost else float(len(mine))
        if len(scores) != len(mine):
            raise ValueError(f"score_samples returned {len(scores)} scores for {len(mine)} samples")
        key = hashlib.sha256(np.asarray(mask, dtype=bool).tobytes() + repr(samples).encode()).hexdigest()
        parts = [None] * self.size
        self._dist.all_gather_object(parts, (key, mine, scores, work), group=self._group)
        self._calls += 1
        for rank, (other, _, _, _) in enumerate(parts):
            if other != key:
                raise RuntimeError(f"bosch.distributed: process {rank} asked for another mask or other samples "
                                   f"than process {self.rank} at scoring call {self._calls}: every process must "
                                   "run the same select() (same options, seed and evaluator samples)")
        got = {}
        for _, idx, vals, w in parts:
            got.update(zip(idx, vals))
            self._cost += w
        return [got[s] for s in samples]

    def evaluate(self, mask):
        return self.reduce(self.score_samples(mask, range(self._n)))

    __call__ = evaluate
