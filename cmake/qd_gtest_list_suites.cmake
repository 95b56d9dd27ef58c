# Run by qd_gtest_suites' POST_BUILD step (cmake -P): writes the test suites
# of the GoogleTest program QD_BINARY to QD_OUTPUT as `set(qd_suites ...)`.
#
# --gtest_list_tests prints each suite flush left, ending in '.', possibly
# followed by a comment ("Prefix/Suite.  # TypeParam = ..."), and its cases
# indented below it.
execute_process(COMMAND "${QD_BINARY}" --gtest_list_tests
                OUTPUT_VARIABLE listing ERROR_VARIABLE errors RESULT_VARIABLE status
                TIMEOUT ${QD_TIMEOUT})
if(NOT status EQUAL 0)
  file(REMOVE "${QD_OUTPUT}")
  message(FATAL_ERROR "${QD_BINARY} --gtest_list_tests failed (${status}):\n${errors}")
endif()
string(REGEX MATCHALL "\n[A-Za-z0-9_/]+\\." lines "\n${listing}")
set(suites "")
foreach(line IN LISTS lines)
  string(REGEX REPLACE "^\n([A-Za-z0-9_/]+)\\.$" "\\1" suite "${line}")
  # A suite named Nightly* takes minutes by design (e.g. torch.load on every
  # vector): scripts/nightly runs it, ctest does not register it.
  if(NOT suite MATCHES "^([A-Za-z0-9_]+/)?Nightly")
    list(APPEND suites "${suite}")
  endif()
endforeach()
if(suites STREQUAL "")
  file(REMOVE "${QD_OUTPUT}")
  message(FATAL_ERROR "${QD_BINARY} lists no test suite")
endif()
file(WRITE "${QD_OUTPUT}" "set(qd_suites [==[${suites}]==])\n")
