// Control for codec_includes_oracle.cc: the same flags resolve the codec's
// own headers and the plain-data interface.
#include "codecs/bnb.h"
#include "quantdiff/plain_data.h"
