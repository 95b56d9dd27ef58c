// Deliberately bad (tests/layering/CMakeLists.txt): generators sit below the
// format registry; with qd_generators' include flags harness/ does not resolve.
#include "harness/registry.h"
