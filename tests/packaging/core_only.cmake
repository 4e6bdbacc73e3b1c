# The header-only core stands alone (CTest: core_only): a program that
# includes only <bosch/bosch.hpp> compiles with nothing but the core's
# include folder and Boost, links no library, and runs. With the compiler's
# include tree (-H) it also checks that no header of the core itself includes
# an OS header (POSIX, <iostream>) and that nothing includes nlohmann/json:
# those belong to bosch::io. (Boost's own configuration reads <unistd.h>;
# that is Boost's business, not the core's.)
#   -DCXX=compiler -DSOURCE_DIR=bosch source -DWORK_DIR=scratch -DBOOST_INCLUDE=dir
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(exe "${WORK_DIR}/core_only")
set(flags -std=c++20 -O1 -I${SOURCE_DIR}/include)
if(BOOST_INCLUDE AND NOT BOOST_INCLUDE STREQUAL "/usr/include")
  list(APPEND flags -isystem ${BOOST_INCLUDE})
endif()
execute_process(COMMAND ${CXX} ${flags} -H ${SOURCE_DIR}/tests/packaging/core_only/main.cpp -o ${exe}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE tree)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "core_only: the program did not compile and link with the core alone:\n${tree}")
endif()
# Walk the include tree: depth = the number of leading dots.
string(REPLACE "\n" ";" lines "${tree}")
set(stack "")
set(bad "")
foreach(line IN LISTS lines)
  if(NOT line MATCHES "^(\\.+) (.+)$")
    continue()
  endif()
  string(LENGTH "${CMAKE_MATCH_1}" depth)
  set(header "${CMAKE_MATCH_2}")
  # The includer is the last header seen at depth - 1 (depth 1: the program).
  set(includer "main.cpp")
  if(depth GREATER 1)
    math(EXPR parent "${depth} - 2")
    list(GET stack ${parent} includer)
  endif()
  list(LENGTH stack n)
  while(n GREATER_EQUAL depth)
    list(REMOVE_AT stack -1)
    list(LENGTH stack n)
  endwhile()
  list(APPEND stack "${header}")
  if(header MATCHES "nlohmann/")
    list(APPEND bad "${header} (from ${includer})")
  elseif(includer MATCHES "/include/bosch/" AND
         header MATCHES "/(iostream|fstream|unistd\\.h|fcntl\\.h|sys/[a-z_]+\\.h|dirent\\.h|pthread\\.h)$")
    list(APPEND bad "${header} (from ${includer})")
  endif()
endforeach()
if(bad)
  list(JOIN bad "\n  " text)
  message(FATAL_ERROR "core_only: the core includes what it must not:\n  ${text}")
endif()
execute_process(COMMAND ${exe} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "core_only: the program failed (${rc}):\n${out}${err}")
endif()
message(STATUS "${out}")
