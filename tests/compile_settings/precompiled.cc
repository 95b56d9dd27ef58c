// precompiled.cc: the translation unit the test programs' precompiled
// headers are built with (tests/compile_settings/CMakeLists.txt). CMake needs one
// source per target; the headers come from target_precompile_headers.
