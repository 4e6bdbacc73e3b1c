// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file tasks/tasks.hpp
/// Everything of bosch::tasks: specs, generators, text, word lists, scoring.

#include <bosch/tasks/codec.hpp>
#include <bosch/tasks/generate.hpp>
#include <bosch/tasks/records.hpp>
#include <bosch/tasks/scoring.hpp>
#include <bosch/tasks/task.hpp>
#include <bosch/tasks/text.hpp>
#include <bosch/tasks/words.hpp>
