# Run by CTest: install the build into a scratch prefix, then configure, build
# and run the consumer project against it (find_package), and once more with
# the source tree added through add_subdirectory.
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
endfunction()

run(${CMAKE_COMMAND} --install "${BOSCH_BUILD_DIR}" --prefix "${prefix}")

# 1. find_package against the install.
run(${CMAKE_COMMAND} -S "${CONSUMER_DIR}" -B "${WORK_DIR}/find" -DCMAKE_BUILD_TYPE=Release
    "-DCMAKE_PREFIX_PATH=${prefix}" -DCONSUMER_MODE=find_package
    -DCONSUMER_WITH_TRANSFORMER=${HAS_TRANSFORMER} -DCONSUMER_WITH_MPI=${HAS_MPI})
run(${CMAKE_COMMAND} --build "${WORK_DIR}/find" -j 2)
run("${WORK_DIR}/find/consumer")

# 2. add_subdirectory of the source tree (header-only core; tests/examples must stay off).
run(${CMAKE_COMMAND} -S "${CONSUMER_DIR}" -B "${WORK_DIR}/subdir" -DCMAKE_BUILD_TYPE=Release
    -DCONSUMER_MODE=add_subdirectory "-DBOSCH_SOURCE_DIR=${BOSCH_SOURCE_DIR}"
    -DCONSUMER_WITH_TRANSFORMER=OFF -DBOSCH_BUILD_TRANSFORMER=OFF)
run(${CMAKE_COMMAND} --build "${WORK_DIR}/subdir" -j 2)
run("${WORK_DIR}/subdir/consumer")
if(EXISTS "${WORK_DIR}/subdir/bosch/tests")
  message(FATAL_ERROR "add_subdirectory built bosch's tests: they must be off when bosch is not top level")
endif()
message(STATUS "packaging: find_package and add_subdirectory consumers built and ran")
