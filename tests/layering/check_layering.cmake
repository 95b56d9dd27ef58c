# check_layering.cmake: builds the tests/layering/ cases (cmake -P).
#   BUILD_DIR  the build tree
#   BAD        <target>:<header>;... must fail, and fail because <header> is not found
#   GOOD       <target>;...          must build (so a bad case cannot pass for a broken setup)
foreach(good IN LISTS GOOD)
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${good}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "control case ${good} does not build:\n${out}")
  endif()
  message(STATUS "control ${good}: builds")
endforeach()
foreach(bad IN LISTS BAD)
  string(REPLACE ":" ";" parts "${bad}")
  list(GET parts 0 target)
  list(GET parts 1 header)
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${target}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(rc EQUAL 0)
    message(FATAL_ERROR "${target} built: ${header} resolves where the layering forbids it")
  endif()
  # gcc: "codecs/bnb.h: No such file or directory"; clang: "'codecs/bnb.h' file not found".
  string(FIND "${out}" "${header}: No such file or directory" gcc_says)
  string(FIND "${out}" "'${header}' file not found" clang_says)
  if(gcc_says EQUAL -1 AND clang_says EQUAL -1)
    message(FATAL_ERROR "${target} failed, but not because ${header} is missing:\n${out}")
  endif()
  message(STATUS "bad ${target}: refused (${header} not found)")
endforeach()
