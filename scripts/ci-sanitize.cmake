# Included by scripts/ci-sanitize (CMAKE_PROJECT_INCLUDE) into its sanitizer
# build. The tests that build runs (readers, tokenizer, tasks, search, crash)
# never call the CPU backend or the evaluator, yet bosch::transformer compiles
# them: their Eigen-heavy sources take 2-5 times longer to compile with
# AddressSanitizer + UBSan (one of them over two minutes) while nothing there
# would be checked. They are compiled without sanitizers; everything else
# keeps them.
cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _bosch_sanitize_scope)
function(_bosch_sanitize_scope)
  if(NOT BOSCH_SANITIZE OR NOT TARGET bosch_transformer)
    return()
  endif()
  file(GLOB _unchecked "${CMAKE_SOURCE_DIR}/transformer/src/cpu/*.cpp" "${CMAKE_SOURCE_DIR}/transformer/src/eval/*.cpp")
  set_source_files_properties(${_unchecked} DIRECTORY "${CMAKE_SOURCE_DIR}/transformer"
    PROPERTIES COMPILE_OPTIONS "-fno-sanitize=all")
endfunction()
