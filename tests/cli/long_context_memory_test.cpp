// Memory at long contexts grows linearly: the forward keeps no buffer of
// tokens x tokens (the tiled attention's online softmax, cpu/attention.hpp).
// `bosch logits` runs the tiny model at 2048 and 8192 tokens in child
// processes and the test compares their peak resident sets (wait4): one fp32
// score matrix of 8192 x 8192 would add 256 MiB; the linear buffers (residual
// stream, one layer's activations, the logits of every position) add a few.
#include "cli_support.hpp"

#include <sys/resource.h>
#include <sys/wait.h>

using namespace bosch::test::cli;

namespace {

/// Peak resident set (KiB) of `bosch logits MODEL ids...` on `tokens` ids,
/// standard output discarded.
long peak_kib(const std::string& model_path, int tokens) {
  std::vector<std::string> args{shipped, "logits", model_path, "--threads", "1", "--allow-long-context", "-q"};
  for (int i = 0; i < tokens; ++i) args.push_back(std::to_string(1 + i % 400));
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    if (null < 0) ::_exit(126);
    ::dup2(null, 1);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  struct rusage usage {};
  REQUIRE(::wait4(pid, &status, 0, &usage) == pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  return usage.ru_maxrss;
}

}  // namespace

TEST_CASE("the forward's memory grows linearly with the context: no tokens x tokens buffer") {
  const std::string m = model();
  if (m.empty()) return;
  const long short_run = peak_kib(m, 2048), long_run = peak_kib(m, 8192);
  INFO("peak RSS " << short_run << " KiB at 2048 tokens, " << long_run << " KiB at 8192");
  // Linear buffers of 6144 more tokens of this model: the residual stream and
  // one layer's activations (hidden 64, a few copies), logits (512 per
  // position) and the attention's per-thread tiles: a few MiB. A quadratic
  // buffer: 256 MiB.
  CHECK(long_run - short_run < 48 * 1024);
}
