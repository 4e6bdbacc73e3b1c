// SPDX-License-Identifier: Apache-2.0
// Internal to bosch::tasks: the samples of a file task (see records.hpp).
#pragma once

#include <bosch/tasks/records.hpp>

#include "segment_encoder.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace bosch::tasks::detail {

/// The spec's num_samples records of its split, as samples; `seed` is the
/// spec's stream (sample_seed of index 0), which orders the records drawn.
/// Throws bosch::invalid_argument (where = the file, or "PATH:LINE" for one
/// record) when the split holds fewer records than asked, a record does not
/// fit and the truncation refuses, or its question and answer alone leave no
/// room; bosch::format_error for an answer that tokenizes to nothing.
std::vector<Sample> record_samples(const TaskSpec& spec, const RecordFile& file,
                                   const SegmentEncoder& enc, std::uint64_t seed);

/// One line of TaskSet::description for a file spec and its samples.
std::string describe_records(const TaskSpec& spec, const RecordFile& file,
                             const std::vector<Sample>& samples);

}  // namespace bosch::tasks::detail
