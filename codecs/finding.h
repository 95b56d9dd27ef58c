// finding.h: the one way the codecs build a qd::Finding.
#ifndef QUANTDIFF_CODECS_FINDING_H_
#define QUANTDIFF_CODECS_FINDING_H_

#include <cstdint>
#include <string>
#include <utility>

#include "quantdiff/plain_data.h"

namespace qd::codec {

// row, block and element stay -1; callers set them where a rule names them.
inline qd::Finding MakeFinding(std::string rule, qd::Severity severity, std::string file,
                               std::string tensor, std::string field, std::int64_t byte_offset,
                               std::string message) {
  qd::Finding f;
  f.rule = std::move(rule);
  f.severity = severity;
  f.file = std::move(file);
  f.tensor = std::move(tensor);
  f.field = std::move(field);
  f.byte_offset = byte_offset;
  f.message = std::move(message);
  return f;
}

}  // namespace qd::codec

#endif  // QUANTDIFF_CODECS_FINDING_H_
