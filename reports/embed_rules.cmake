# embed_rules.cmake: turns oracles/rules.json into a .cc file holding the
# catalogue as one raw string literal, so the quantdiff binary carries the
# rule texts it reports and needs no file at run time.
#
#   cmake -DIN=oracles/rules.json -DOUT=rules_embedded.cc -P embed_rules.cmake
#
# Run by an add_custom_command that depends on the JSON, so editing the
# catalogue regenerates the file on the next build.
if(NOT DEFINED IN OR NOT DEFINED OUT)
  message(FATAL_ERROR "embed_rules.cmake: pass -DIN=<rules.json> -DOUT=<file.cc>")
endif()
file(READ "${IN}" json)
set(delimiter "qd_rules_json")
string(FIND "${json}" ")${delimiter}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw string delimiter )${delimiter}\"")
endif()
set(text "// Generated from ${IN} by reports/embed_rules.cmake. Do not edit.\n")
string(APPEND text "#include <string_view>\n\n")
string(APPEND text "namespace qd::reports::internal {\n\n")
string(APPEND text "extern const std::string_view kRulesJson;\n")
string(APPEND text "const std::string_view kRulesJson = R\"${delimiter}(${json})${delimiter}\";\n\n")
string(APPEND text "}  // namespace qd::reports::internal\n")
include(${CMAKE_CURRENT_LIST_DIR}/../cmake/write_if_changed.cmake)
qd_write_if_changed("${OUT}" "${text}")
