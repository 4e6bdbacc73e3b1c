// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file python/src/masks.hpp
/// bosch.HeadLayout, bosch.MaskFile, read_mask / write_mask (JSON,
/// DuoAttention TSV, text grid: include/bosch/io/mask_io.hpp), the layer
/// baselines (RAND, BME, INTR) and mask_from_scores
/// (include/bosch/baselines/), turnover, jaccard_distance, to_grid.

#include "convert.hpp"

namespace bosch::python {

void bind_masks(nb::module_& m);

}  // namespace bosch::python
