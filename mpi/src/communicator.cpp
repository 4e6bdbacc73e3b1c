// SPDX-License-Identifier: Apache-2.0
// bosch::mpi::Communicator (include/bosch/mpi/communicator.hpp).

#include <bosch/mpi/communicator.hpp>

#include <climits>
#include <utility>

namespace bosch::mpi {

void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
  throw error(len > 0 ? std::string(text, static_cast<std::size_t>(len))
                      : "MPI error code " + std::to_string(rc),
              call);
}

namespace {
int to_int(std::size_t n, const char* call) {
  if (n > static_cast<std::size_t>(INT_MAX))
    throw error("message of " + std::to_string(n) + " elements exceeds MPI's int counts", call);
  return static_cast<int>(n);
}
}  // namespace

Communicator::Communicator(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {
  check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
}

Communicator Communicator::world() { return Communicator(MPI_COMM_WORLD, false); }

Communicator::Communicator(Communicator&& o) noexcept
    : comm_(std::exchange(o.comm_, MPI_COMM_NULL)),
      owned_(std::exchange(o.owned_, false)),
      rank_(o.rank_),
      size_(o.size_) {}

Communicator& Communicator::operator=(Communicator&& o) noexcept {
  if (this != &o) {
    if (owned_ && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
    comm_ = std::exchange(o.comm_, MPI_COMM_NULL);
    owned_ = std::exchange(o.owned_, false);
    rank_ = o.rank_;
    size_ = o.size_;
  }
  return *this;
}

Communicator::~Communicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owned_ && comm_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm_);
}

Communicator Communicator::split(int color, int key) const {
  MPI_Comm c = MPI_COMM_NULL;
  check(MPI_Comm_split(comm_, color, key, &c), "MPI_Comm_split");
  return Communicator(c, true);
}

Communicator Communicator::split_shared() const {
  MPI_Comm c = MPI_COMM_NULL;
  check(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &c), "MPI_Comm_split_type");
  return Communicator(c, true);
}

void Communicator::barrier() const { check(MPI_Barrier(comm_), "MPI_Barrier"); }

bool Communicator::any(bool local) const {
  int in = local ? 1 : 0, out = 0;
  check(MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_LOR, comm_), "MPI_Allreduce");
  return out != 0;
}

int Communicator::max(int local) const {
  int out = 0;
  check(MPI_Allreduce(&local, &out, 1, MPI_INT, MPI_MAX, comm_), "MPI_Allreduce");
  return out;
}

std::uint64_t Communicator::sum(std::uint64_t local) const {
  std::uint64_t out = 0;
  check(MPI_Allreduce(&local, &out, 1, MPI_UINT64_T, MPI_SUM, comm_), "MPI_Allreduce");
  return out;
}

std::vector<double> Communicator::all_gather(std::span<const double> local) const {
  const int n = to_int(local.size(), "MPI_Allgatherv");
  std::vector<int> counts(static_cast<std::size_t>(size_)), displs(static_cast<std::size_t>(size_));
  check(MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, comm_), "MPI_Allgather");
  std::size_t total = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    displs[r] = to_int(total, "MPI_Allgatherv");
    total += static_cast<std::size_t>(counts[r]);
  }
  std::vector<double> out(total);
  check(MPI_Allgatherv(local.data(), n, MPI_DOUBLE, out.data(), counts.data(), displs.data(), MPI_DOUBLE,
                       comm_),
        "MPI_Allgatherv");
  return out;
}

void Communicator::broadcast(std::string& text, int from) const {
  unsigned long long n = text.size();
  check(MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, from, comm_), "MPI_Bcast");
  text.resize(static_cast<std::size_t>(n));
  check(MPI_Bcast(text.data(), to_int(text.size(), "MPI_Bcast"), MPI_CHAR, from, comm_), "MPI_Bcast");
}

}  // namespace bosch::mpi
