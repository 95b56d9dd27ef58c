// Control for generator_includes_harness.cc: generators build on the codecs.
#include "codecs/bnb.h"
#include "generators/generators.h"
