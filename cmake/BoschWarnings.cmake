# bosch_warnings(TARGET): the project's warning flags, for its own targets only
# (never propagated to users through the INTERFACE target).
function(bosch_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wno-unused-parameter>)
endfunction()
