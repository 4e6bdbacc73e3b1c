// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file python/src/processes.hpp
/// bosch.TransformerEvaluator under an MPI launcher: `mpirun -n 4 python
/// script.py` spreads each bosch.select of a TransformerEvaluator over the
/// processes, as `mpirun -n 4 bosch select` does (bosch::mpi::RunExecutor,
/// docs/mpi.md); bosch.mpi_rank() and bosch.mpi_size() tell the script which
/// process it is (rank 0 writes the files).

#include "convert.hpp"

#include <bosch/run/selection.hpp>

#include <memory>

namespace bosch::python {

/// The executor of a TransformerEvaluator's search: nullptr (this process)
/// unless an MPI launcher started several processes; then the MPI executor
/// (MPI is initialized at the first call, finalized at exit). Throws
/// bosch::error when a launcher started several processes and this module
/// was built without MPI (each would run the whole search and write the
/// same files).
std::unique_ptr<SearchExecutor> process_executor(const InfoSink& info);

void bind_processes(nb::module_& m);

}  // namespace bosch::python
