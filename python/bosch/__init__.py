# SPDX-License-Identifier: Apache-2.0
"""bosch: training-free selection of sliding-window attention heads (BOSCH).

The search is the C++ core of the bosch library; the evaluator is any Python
callable that scores a head mask (a NumPy bool array of shape
``(layers, kv_heads)``, ``True`` = sliding-window head; higher is better)::

    import bosch

    def evaluate(mask):
        return my_benchmark(model_with_windows(mask))

    result = bosch.select(evaluate, "30x9x3", 0.5, seed=1)
    result.mask            # (30, 3) bool array with exactly 45 SWA heads
    bosch.write_mask("mask.json", result)

``bosch.TransformerEvaluator`` runs the bundled C++ evaluator (a GGUF or
Hugging Face model on generated long-context tasks) instead.
"""

from ._bosch import (
    Anchors,
    DeviceError,
    EarlyStop,
    Error,
    EvaluationRecord,
    FileError,
    FormatError,
    HeadLayout,
    InvalidArgument,
    MaskFile,
    Options,
    ProgressReporter,
    Result,
    SearchView,
    TransformerEvaluator,
    has_cuda,
    jaccard_distance,
    layer_bme,
    layer_intr,
    layer_rand,
    mask_from_scores,
    mpi_rank,
    mpi_size,
    read_mask,
    select,
    target_count,
    to_grid,
    turnover,
    write_mask,
)
from ._bosch import version as __version__

# The exception classes live in the extension module; show them as bosch.Name.
for _cls in (Error, InvalidArgument, FormatError, FileError, DeviceError):
    _cls.__module__ = "bosch"
del _cls

__all__ = [
    "Anchors",
    "DeviceError",
    "EarlyStop",
    "Error",
    "EvaluationRecord",
    "FileError",
    "FormatError",
    "HeadLayout",
    "InvalidArgument",
    "MaskFile",
    "Options",
    "ProgressReporter",
    "Result",
    "SearchView",
    "TransformerEvaluator",
    "__version__",
    "has_cuda",
    "jaccard_distance",
    "layer_bme",
    "layer_intr",
    "layer_rand",
    "mask_from_scores",
    "mpi_rank",
    "mpi_size",
    "read_mask",
    "select",
    "target_count",
    "to_grid",
    "turnover",
    "write_mask",
]
