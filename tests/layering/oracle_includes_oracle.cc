// Control for oracle_includes_codec.cc: the same flags resolve the oracle's
// own headers and the plain-data interface.
#include "oracles/bnb.h"
#include "quantdiff/plain_data.h"
