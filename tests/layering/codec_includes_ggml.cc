// Deliberately bad (tests/layering/CMakeLists.txt): ggml is opened only by
// front ends and tests (thirdparty/ggml/), never by the codecs it is
// compared with, so this must not compile with qd_codecs' include flags.
#include "thirdparty/ggml/ggml_library.h"
