// SPDX-License-Identifier: Apache-2.0
// The bosch program's MPI session (mpi_session.hpp).

#include "mpi_session.hpp"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <streambuf>
#include <thread>

#ifdef BOSCH_HAVE_CUDA
#include <bosch/cuda/backend.hpp>
#endif

namespace bosch::cli {

namespace {

MpiSession* g_session = nullptr;

/// A stream buffer that drops everything (stdout of ranks other than 0).
class NullBuffer : public std::streambuf {
 protected:
  int overflow(int c) override { return traits_type::not_eof(c); }
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};

/// Keeps the last few KiB written (stderr of ranks other than 0: the error
/// line of a failure is reported by finish()).
class TailBuffer : public std::streambuf {
 public:
  std::string text;

 protected:
  int overflow(int c) override {
    if (c != traits_type::eof()) append(std::string(1, static_cast<char>(c)));
    return traits_type::not_eof(c);
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    append(std::string(s, static_cast<std::size_t>(n)));
    return n;
  }

 private:
  void append(const std::string& s) {
    text += s;
    if (text.size() > 16384) text.erase(0, text.size() - 8192);
  }
};

/// The last non-empty line of `text`.
std::string last_line(const std::string& text) {
  const std::size_t end = text.find_last_not_of('\n');
  if (end == std::string::npos) return {};
  const std::size_t nl = text.rfind('\n', end);
  const std::size_t begin = nl == std::string::npos ? 0 : nl + 1;
  return text.substr(begin, end + 1 - begin);
}

}  // namespace

struct MpiSession::Streams {
  NullBuffer null;
  TailBuffer err;
  std::streambuf* cout = nullptr;
  std::streambuf* cerr = nullptr;
  std::streambuf* clog = nullptr;
};

MpiSession::MpiSession(int& argc, char**& argv) {
#ifdef BOSCH_HAVE_MPI
  if (bosch::mpi::launched()) {
    try {
      env_.emplace(argc, argv);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bosch: %s\n", e.what());
      std::exit(exit_failure);
    }
    rank_ = env_->world().rank();
    size_ = env_->world().size();
    local_rank_ = env_->local_rank();
  }
#else
  (void)argc;
  (void)argv;
  // The variables bosch::mpi::launched_size() reads, without MPI.
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_STEP_NUM_TASKS"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && std::atoi(v) > 1) {
      std::fprintf(stderr,
                   "bosch: started as %s processes by an MPI launcher, but this build has no MPI support: each "
                   "would run the whole search alone (install libopenmpi-dev and rebuild)\n",
                   v);
      std::exit(exit_usage);
    }
  }
#endif
  if (size_ > 1 && rank_ != 0) {
    streams_ = std::make_unique<Streams>();
    streams_->cout = std::cout.rdbuf(&streams_->null);
    streams_->cerr = std::cerr.rdbuf(&streams_->err);
    streams_->clog = std::clog.rdbuf(&streams_->err);
  }
  g_session = this;
}

MpiSession::~MpiSession() {
  if (streams_) {
    std::cout.rdbuf(streams_->cout);
    std::cerr.rdbuf(streams_->cerr);
    std::clog.rdbuf(streams_->clog);
  }
  if (g_session == this) g_session = nullptr;
}

MpiSession& mpi_session() {
  // Without main()'s session (a command called directly): one process.
  static MpiSession single;
  return g_session != nullptr ? *g_session : single;
}

po::options_description MpiSession::describe() {
  po::options_description d("Parallel (several processes under mpirun or srun)");
  d.add_options()("mpi-mode",
                  po::value(&mode_)->default_value(mode_)->value_name("MODE")->notifier([](const std::string& v) {
                    // Checked where it is read, with or without MPI in this build.
                    if (v != "samples" && v != "masks" && v != "auto")
                      throw bosch::invalid_argument("unknown mode '" + v + "' (expected samples, masks or auto)",
                                                    "--mpi-mode");
                  }),
                  "samples: every rank scores every mask on its share of the calibration samples; masks: the "
                  "masks of a batch are spread over groups of --mpi-group-size ranks; auto: samples, or masks "
                  "when there are more ranks than samples. The result is the same in every mode")(
      "mpi-group-size", po::value(&group_size_)->default_value(group_size_)->value_name("N"),
      "ranks per group in masks mode, each group sample-parallel (0 = 1, or automatic with auto)");
  return d;
}

po::options_description MpiSession::describe_hidden() {
  po::options_description d;
  d.add_options()(
      "mpi-test-fail", po::value(&test_fail_)->value_name("RANK:N")->notifier([this](const std::string& v) {
        const auto colon = v.find(':');
        std::size_t used = 0;
        try {
          fail_rank_ = std::stoi(v.substr(0, colon), &used);
          if (colon == std::string::npos || used != colon) throw std::invalid_argument(v);
          fail_after_ = std::stoul(v.substr(colon + 1), &used);
          if (used != v.size() - colon - 1) throw std::invalid_argument(v);
        } catch (const std::exception&) {
          throw usage_error("--mpi-test-fail: expected RANK:N, got '" + v + "'");
        }
      }),
      "test hook: rank RANK fails after N evaluations");
  return d;
}

int MpiSession::gpu(int requested, bool given) const {
  if (given || !parallel()) return requested;
  int devices = 1;
#ifdef BOSCH_HAVE_CUDA
  devices = 0;
  while (devices < 64 && cuda::device_available(nullptr, devices)) ++devices;
  if (devices == 0) devices = 1;  // the backend reports the missing device
#endif
  return local_rank_ % devices;
}

void MpiSession::barrier() const {
#ifdef BOSCH_HAVE_MPI
  if (parallel()) env_->world().barrier();
#endif
}

int MpiSession::finish(int status) {
  if (!parallel() || status == exit_success || status == exit_sigint || status == exit_sigterm) return status;
#ifdef BOSCH_HAVE_MPI
  std::string line;
  if (streams_) {
    line = last_line(streams_->err.text);
    // A failure every rank meets (a bad option, a missing file) is reported by
    // rank 0, which aborts the job at once; wait a moment so that a rank that
    // failed alone is the one that reports.
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  } else {
    line = "see the error above; the other ranks are stopped";
  }
  bosch::mpi::Environment::abort(status, line.empty() ? "exit status " + std::to_string(status) : line);
#else
  return status;
#endif
}

namespace detail {

void TestFailure::on_evaluation(const SearchView& v, const EvaluationRecord&) const {
  if (after > 0 && v.evaluations == after)
    throw bosch::error("failure requested by --mpi-test-fail after " + std::to_string(after) + " evaluations");
}

#ifdef BOSCH_HAVE_MPI
bool SignalAgreement::on_evaluation(const SearchView&, const EvaluationRecord&) const {
  const int s = comm->max(SignalGuard::received());
  if (s != 0 && SignalGuard::received() == 0) std::raise(s);
  return s != 0;
}
#endif

}  // namespace detail

Result MpiExecutor::select(ModelRun& run, const Options& options, CallbackList& callbacks) {
  MpiSession& s = mpi_session();
  detail::TestFailure fail{s.fail_after()};
#ifdef BOSCH_HAVE_MPI
  if (s.parallel()) {
    bosch::mpi::RunExecutor parallel(s.world(), s.plan(), [this](const std::string& line) { *info_ << line; });
    detail::SignalAgreement signals{&s.world()};
    parallel.every_process.add(fail);
    parallel.every_process.add(signals);
    return parallel.select(run, options, callbacks);
  }
#endif
  auto observers = callbacks.observers();
  auto voters = callbacks.voters();
  return bosch::select(run, options, observers, voters, fail);
}

namespace {
/// A count of this process's work summed over the processes (collective under MPI).
std::size_t summed_over_ranks(std::size_t local) {
#ifdef BOSCH_HAVE_MPI
  MpiSession& s = mpi_session();
  if (s.parallel()) return s.world().sum(local);
#endif
  return local;
}
}  // namespace

std::size_t MpiExecutor::layers_run(const ModelRun& run) {
  return summed_over_ranks(run.stats().layer_applications());
}

std::size_t MpiExecutor::row_layers(const ModelRun& run) { return summed_over_ranks(run.stats().row_layers); }

eval::SharedScoring shared_scoring(TransformerEvaluator<cpu::Backend>& evaluator, std::ostream& info,
                                   std::shared_ptr<void>& holder) {
#ifdef BOSCH_HAVE_MPI
  MpiSession& s = mpi_session();
  if (s.parallel())
    return bosch::mpi::shared_scoring(evaluator, s.world(), s.plan(),
                                      [&info](const std::string& line) { info << line; }, holder);
#else
  (void)evaluator;
  (void)info;
  (void)holder;
#endif
  return {};
}

}  // namespace bosch::cli
