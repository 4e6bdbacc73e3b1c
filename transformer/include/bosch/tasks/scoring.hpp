// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file tasks/scoring.hpp
/// Scores of a model's output on a task sample; pure functions over logits and
/// strings, so any backend works.
///  - Continuous score for the search: the mean teacher-forced log-probability
///    of the answer tokens (and its exponent, the geometric-mean probability).
///  - Accuracy for reporting: greedy decoding (through a next-token callback)
///    scored with RULER's string_match_all / string_match_part
///    (NVIDIA/RULER scripts/eval/synthetic/constants.py), or the passkey rule
///    (the first integer of the output equals the key).

#include <bosch/tasks/task.hpp>

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bosch::tasks {

/// log softmax(row)[id], computed in double with the max subtracted first
/// (stable for any finite logits). Throws bosch::invalid_argument for an empty
/// row or an id outside it.
double log_softmax(std::span<const float> row, int id);

/// Index of the largest logit (the first one on ties); -1 for an empty row.
int argmax(std::span<const float> row) noexcept;

/// The teacher-forced score of one answer.
struct AnswerScore {
  double mean_logprob = 0;  ///< mean over answer tokens of log p(token | prefix), nats (<= 0)
  double probability = 0;   ///< exp(mean_logprob): geometric-mean token probability in (0, 1]
  double sum_logprob = 0;   ///< sum over answer tokens, nats
  int tokens = 0;           ///< answer tokens scored
};

/// Scores `answer` from the logits at its positions: `logits` holds
/// answer.size() rows of `vocab` floats, row-major, row i being the logits that
/// predict answer[i] (position P-1+i of prompt+answer, see teacher_forcing()).
/// Throws bosch::invalid_argument when the sizes disagree, the answer is empty
/// or an id is outside [0, vocab).
AnswerScore answer_logprob(std::span<const float> logits, int vocab, std::span<const int> answer);

/// The input of a teacher-forced forward pass for a prompt of length P and an
/// answer of length m: tokens = prompt + answer[0 .. m-2] (the last answer
/// token is never an input: its logits are not needed), and positions = P-1 ..
/// P+m-2, the rows whose logits predict answer[0 .. m-1].
struct TeacherForcing {
  std::vector<int> tokens;
  std::vector<int> positions;
};
/// Throws bosch::invalid_argument for an empty prompt or answer.
TeacherForcing teacher_forcing(std::span<const int> prompt, std::span<const int> answer);
TeacherForcing teacher_forcing(const Sample& sample);

/// RULER string_match_all for one sample: the fraction of `references` that
/// occur in `prediction`, ignoring ASCII case. 0 for no references.
double string_match_all(std::string_view prediction, std::span<const std::string> references);
/// RULER string_match_part for one sample: 1 when any reference occurs in
/// `prediction` (ignoring ASCII case), else 0.
double string_match_part(std::string_view prediction, std::span<const std::string> references);
/// Passkey rule: the first maximal run of decimal digits in `prediction` equals
/// `key` (false when there is no digit).
bool passkey_match(std::string_view prediction, std::string_view key);

/// LongBench's (and SQuAD's) normalize_answer: ASCII lowercase, ASCII
/// punctuation removed, the words "a", "an" and "the" removed, runs of
/// whitespace made one space, no leading or trailing space.
std::string normalize_answer(std::string_view text);
/// The first line of `prediction` that is not blank (LongBench's QA
/// post-processing: a model that answers and goes on is scored on its answer).
std::string_view first_line(std::string_view prediction);
/// LongBench's qa_f1_score: the F1 of the whitespace tokens of the
/// normalized prediction and gold answer (their multiset overlap); 0 when
/// either is empty after normalization.
double token_f1(std::string_view prediction, std::string_view gold);
/// Normalized exact match: normalize_answer(prediction) == normalize_answer(gold).
bool exact_match(std::string_view prediction, std::string_view gold);

/// The task's accuracy of one prediction (the generated text after the prompt),
/// in [0, 1]: passkey_match for passkey, token_f1 of the first line against
/// the gold answer for a file task (LongBench's QA metric), string_match_all
/// otherwise (NIAH as RULER; copy: the whole expected continuation must occur).
double accuracy(const Sample& sample, std::string_view prediction);
/// For a file task, exact_match of the prediction's first line against the
/// gold answer (1 or 0); NaN for the built-in tasks, whose rule is accuracy().
double answer_match(const Sample& sample, std::string_view prediction);

/// The model's next token (greedy: the argmax of the last position's logits)
/// after `tokens` (prompt + what was generated so far; the evaluator may keep a
/// cache keyed on this growing prefix).
using NextToken = std::function<int(std::span<const int> tokens)>;

/// Greedy decoding: calls next_token up to max_new times, appending each token,
/// and stops after `eos` (when eos >= 0). Returns the generated tokens, eos
/// excluded. Throws bosch::invalid_argument for max_new < 0.
std::vector<int> greedy_generate(const NextToken& next_token, std::span<const int> prompt,
                                 int max_new, int eos = -1);

}  // namespace bosch::tasks
