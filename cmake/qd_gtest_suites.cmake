# qd_gtest_suites(TARGET LABELS label... [DISCOVERY_TIMEOUT seconds]
#                 [PROPERTIES name value ...])
#
# Registers a GoogleTest program with ctest as one test per test suite:
# `Suite` runs `TARGET --gtest_filter=Suite.*` (a parameterised suite
# `Prefix/Suite` likewise), with the labels and the PROPERTIES (one value
# each, e.g. TIMEOUT 300) on every suite's test.
#
# Why not one ctest test per test case, as gtest_discover_tests registers:
# the README test command runs every test under both presets, and each case
# was a process of its own. An ASan+UBSan process costs about 0.1 s of CPU
# to start before its test runs; with ~1650 cases that was a large part of
# the sanitizer preset's ctest time on CI's two cores. A suite is one
# process, and still a unit a failure names (ctest -R Suite; the test
# program itself with --gtest_filter=Suite.Case for one case).
#
# A suite whose name starts with Nightly is not registered: it is one that
# takes minutes by design, and scripts/nightly runs it (--gtest_filter).
#
# A suite in which a case calls GTEST_SKIP shows as skipped, not passed
# (SKIP_REGULAR_EXPRESSION on gtest's "[  SKIPPED ]"): no skip counts as a
# pass.
#
# How: a POST_BUILD step lists the program's suites into
# <TARGET>_suites.cmake (qd_gtest_list_suites.cmake); ctest reads that list
# through a per-target include file written at configure time. A program
# that is not built shows as one failing <TARGET>_NOT_BUILT test.
set(_qd_gtest_list_suites_script ${CMAKE_CURRENT_LIST_DIR}/qd_gtest_list_suites.cmake)

function(qd_gtest_suites target)
  cmake_parse_arguments(ARG "" "DISCOVERY_TIMEOUT" "LABELS;PROPERTIES" ${ARGN})
  if(ARG_UNPARSED_ARGUMENTS OR NOT ARG_LABELS)
    message(FATAL_ERROR "qd_gtest_suites(${target}): needs LABELS; unknown: ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT ARG_DISCOVERY_TIMEOUT)
    set(ARG_DISCOVERY_TIMEOUT 60)
  endif()
  set(list_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_suites.cmake")
  set(include_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_suites_include.cmake")

  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -D "QD_BINARY=$<TARGET_FILE:${target}>" -D "QD_OUTPUT=${list_file}"
            -D "QD_TIMEOUT=${ARG_DISCOVERY_TIMEOUT}" -P ${_qd_gtest_list_suites_script}
    BYPRODUCTS ${list_file}
    VERBATIM)

  # Each property name and value as a bracket argument: values such as
  # RC_PARAMS=max_success=25 pass through unchanged.
  set(properties "")
  foreach(item IN LISTS ARG_PROPERTIES)
    string(APPEND properties " [==[${item}]==]")
  endforeach()
  file(GENERATE OUTPUT ${include_file} CONTENT
"if(EXISTS [==[${list_file}]==])
  include([==[${list_file}]==])
  foreach(suite IN LISTS qd_suites)
    add_test(\"\${suite}\" [==[$<TARGET_FILE:${target}>]==] \"--gtest_filter=\${suite}.*\")
    set_tests_properties(\"\${suite}\" PROPERTIES
      LABELS [==[${ARG_LABELS}]==]
      WORKING_DIRECTORY [==[${CMAKE_CURRENT_BINARY_DIR}]==]
      SKIP_REGULAR_EXPRESSION [==[\\[  SKIPPED \\]]==]${properties})
  endforeach()
else()
  add_test([==[${target}_NOT_BUILT]==] [==[${target}_NOT_BUILT]==])
endif()
")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${include_file})
endfunction()
