// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file mpi/communicator.hpp
/// bosch::mpi::Communicator: the few MPI collectives the parallel search needs
/// (gather of per-sample scores, agreement on a stop, broadcast of a replayed
/// log), on an MPI communicator whose error handler is MPI_ERRORS_RETURN, so a
/// failed call becomes a bosch::mpi::error naming the call instead of a silent
/// abort. Part of bosch::mpi (compiled in mpi/); needs an initialized MPI
/// (bosch::mpi::Environment).
///
/// Every member that communicates is collective: every process of the
/// communicator calls it, in the same order. bosch's SPMD design (docs in
/// docs/mpi.md) guarantees that: every process runs the same
/// deterministic search on the same scores.

#include <bosch/error.hpp>

#include <mpi.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace bosch::mpi {

/// A failed MPI call; where() is the call ("MPI_Allgatherv"), the message is
/// MPI's error string.
class error : public bosch::error {
 public:
  using bosch::error::error;
};

/// Throws bosch::mpi::error when `rc` is not MPI_SUCCESS.
void check(int rc, const char* call);

/// An MPI communicator (MPI_COMM_WORLD, not owned, or one made by split(),
/// owned and freed at destruction). Move-only.
class Communicator {
 public:
  /// MPI_COMM_WORLD, with MPI_ERRORS_RETURN set.
  static Communicator world();

  Communicator(Communicator&& other) noexcept;
  Communicator& operator=(Communicator&& other) noexcept;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  ~Communicator();

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  bool root() const noexcept { return rank_ == 0; }
  MPI_Comm native() const noexcept { return comm_; }

  /// MPI_Comm_split: processes with the same `color` form a new communicator,
  /// ranked by `key`. Collective.
  Communicator split(int color, int key) const;
  /// The processes of this communicator that share memory (one node), by
  /// MPI_Comm_split_type(MPI_COMM_TYPE_SHARED). Collective.
  Communicator split_shared() const;

  /// MPI_Barrier. Collective.
  void barrier() const;
  /// True on every process when `local` is true on any. Collective.
  bool any(bool local) const;
  /// The largest `local` over the processes. Collective.
  int max(int local) const;
  /// The sum of `local` over the processes. Collective.
  std::uint64_t sum(std::uint64_t local) const;
  /// Every process's `local` values, concatenated in rank order (the counts
  /// may differ between processes, zero included). Collective.
  std::vector<double> all_gather(std::span<const double> local) const;
  /// `text` of process `from` on every process. Collective.
  void broadcast(std::string& text, int from = 0) const;

 private:
  Communicator(MPI_Comm comm, bool owned);
  MPI_Comm comm_ = MPI_COMM_NULL;
  bool owned_ = false;
  int rank_ = 0, size_ = 1;
};

}  // namespace bosch::mpi
