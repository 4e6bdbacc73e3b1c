# CUDA detection for bosch::cuda. On by default when nvcc is found; no GPU is
# needed to build (architectures default to sm_90 plus PTX for newer chips,
# since "native" detection cannot work on a machine without a GPU).
include(CheckLanguage)
check_language(CUDA)
set(_bosch_cuda_default OFF)
if(CMAKE_CUDA_COMPILER AND BOSCH_BUILD_TRANSFORMER)
  set(_bosch_cuda_default ON)
endif()
option(BOSCH_WITH_CUDA "Build the CUDA backend bosch::cuda" ${_bosch_cuda_default})
if(BOSCH_WITH_CUDA)
  if(NOT BOSCH_BUILD_TRANSFORMER)
    message(FATAL_ERROR "BOSCH_WITH_CUDA needs BOSCH_BUILD_TRANSFORMER")
  endif()
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    # 90-real: SASS for Hopper; 90-virtual: PTX that newer chips JIT-compile.
    set(CMAKE_CUDA_ARCHITECTURES 90-real 90-virtual)
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  if(EXISTS "${CMAKE_CURRENT_SOURCE_DIR}/cuda/CMakeLists.txt")
    add_subdirectory(cuda)
  endif()
endif()
if(BOSCH_REQUIRE_CUDA AND NOT BOSCH_WITH_CUDA)
  message(FATAL_ERROR "BOSCH_REQUIRE_CUDA=ON needs the CUDA backend, but BOSCH_WITH_CUDA is OFF "
    "(nvcc not found, or switched off): the CUDA tests would not even be built")
endif()
