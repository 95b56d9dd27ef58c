// Deliberately bad (tests/layering/CMakeLists.txt): a codec source that
// includes an oracle header must not compile with qd_codecs' include flags.
#include "oracles/bnb.h"
