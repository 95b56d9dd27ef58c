// Deliberately bad (tests/layering/CMakeLists.txt): an oracle source that
// includes a codec header must not compile with qd_oracles' include flags.
#include "codecs/bnb.h"
