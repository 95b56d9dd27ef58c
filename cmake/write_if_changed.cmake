# write_if_changed.cmake: qd_write_if_changed(PATH TEXT) writes TEXT to PATH
# only when it differs, so that an unrelated reconfigure rebuilds nothing.
# Included by the generators of embedded sources (reports/embed_rules.cmake,
# cmake/embed_files.cmake).
function(qd_write_if_changed path text)
  if(EXISTS "${path}")
    file(READ "${path}" previous)
    if(previous STREQUAL text)
      return()
    endif()
  endif()
  file(WRITE "${path}" "${text}")
endfunction()
