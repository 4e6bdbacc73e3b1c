# MPI detection for bosch::mpi. On by default when find_package(MPI) finds an
# MPI with C++ support (Debian: libopenmpi-dev, openmpi-bin); it needs only the
# header-only core, so it builds with or without bosch::transformer.
find_package(MPI COMPONENTS CXX QUIET)
set(_bosch_mpi_default OFF)
if(MPI_CXX_FOUND)
  set(_bosch_mpi_default ON)
endif()
option(BOSCH_WITH_MPI "Build bosch::mpi (the search spread over MPI processes)" ${_bosch_mpi_default})
if(BOSCH_WITH_MPI)
  find_package(MPI REQUIRED COMPONENTS CXX)
  add_subdirectory(mpi)
endif()
