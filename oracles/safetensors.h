// safetensors.h: the oracle's strict safetensors container reader.
//
// Written from the safetensors format text and the rule catalogue
// oracles/rules.json (rules ST-001..ST-013, ST-101, ST-102), with its own
// UTF-8 validator (RFC 3629) and its own JSON parser (RFC 8259). It is the
// slow, plain half of the differential test: one function per rule group,
// scalar loops, no tables shared with codecs/.
//
// Finding conventions used by every oracle reader:
//   byte_offset  0          ST-001, ST-002, ST-003 (the length prefix)
//                8          every finding about the JSON header (ST-004..ST-011,
//                           ST-101, ST-102, RBQ-001..RBQ-004, RBQ-101)
//                8+N+begin  a finding about a tensor's data (ST-013, RBQ-005
//                           adds the block offset); ST-012 points at the
//                           first trailing byte, 8+N+last_end.
//   field        "header", "__metadata__", "dtype", "shape", "data_offsets",
//                "data", "format", "block", "scale"; empty when none applies.
#ifndef QUANTDIFF_ORACLES_SAFETENSORS_H_
#define QUANTDIFF_ORACLES_SAFETENSORS_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "oracles/tensor_fields.h"
#include "quantdiff/plain_data.h"
#include "quantdiff/tensor_sink.h"

namespace qd::oracle {

// Reads a safetensors file: runs ST-001..ST-013 (with warnings ST-101 and
// ST-102) in catalogue order and, when the file is accepted, decodes every
// F32, F16, BF16 and F64 tensor to binary32 in (begin, end, name) order.
// Every other dtype (including Q4B32 and Q8B32) is skipped.
qd::Outcome ReadSafetensors(qd::ByteView file, const std::string& file_name);

// The same read, handing the decoded tensors to SINK chunk by chunk
// (quantdiff/tensor_sink.h) instead of returning them: an accepted file's
// float tensors are planned, then each comes kChunkValues values at a time.
// The outcome's findings and verdict are ReadSafetensors'; its tensors are
// empty.
qd::Outcome StreamSafetensors(qd::ByteView file, const std::string& file_name, qd::TensorSink& sink);

// ---------------------------------------------------------------------------
// Pieces shared with rbq.cc (the RBQ reader runs the container first).

// One tensor of the directory, after ST-007..ST-010 have passed. 80
// bytes (merged_table.h's TableTensor adds 40 and keeps the deque blocks of
// the two the same heap size; a static_assert there keeps both).
struct ContainerTensor {
  std::string name;
  DtypeName dtype;  // tensor_fields.h: 8 bytes, not a std::string
  Dims shape;       // 16 bytes, a heap block only from rank 2
  std::uint64_t element_count = 0;  // product of shape (1 for an empty shape)
  std::uint64_t begin = 0;          // data_offsets[0], relative to the data
  std::uint64_t end = 0;            // data_offsets[1], relative to the data
};

// What the container stage learned from an accepted header.
struct Container {
  std::uint64_t header_size = 0;  // N
  std::uint64_t data_start = 0;   // 8 + N, absolute offset of the data
  bool has_metadata = false;
  // __metadata__ members in document order (all values are strings).
  std::vector<std::pair<std::string, std::string>> metadata;
  // Tensors sorted by (begin, end, name bytes). A deque: the header's
  // entries are gathered into it as they are parsed (their count known only
  // at the end) and kept there, never copied into a second array (issue 9,
  // section 3: two copies of 1M entries were 224 MB).
  std::deque<ContainerTensor> tensors;
};

// Runs every container rule in order, appending findings to outcome->findings.
// Returns true when the container is accepted (then *container is filled);
// returns false and sets outcome->refused at the first error.
bool CheckContainer(qd::ByteView file, const std::string& file_name,
                    qd::Outcome* outcome, Container* container);

// The floating dtypes the readers decode: F32, F16, BF16, F64.
bool IsFloatDtype(const std::string& dtype);
// Hands COUNT elements of little-endian DTYPE (F32, F16, BF16, F64) data to
// SINK as tensor number INDEX of its plan, widened to binary32 as
// FloatElement does, kChunkValues values at a time. False when the sink stops.
bool StreamFloatElements(const std::string& dtype, const std::uint8_t* data, std::uint64_t count,
                         std::size_t index, qd::TensorSink& sink);
// Hands an F32/F16/BF16/F64 tensor of an accepted container to SINK as
// tensor number INDEX of its plan, kChunkValues values at a time. False when
// the sink stops. (Exposed for rbq.cc, bnb.cc and gptq.cc, which stream the
// floating tensors in between their own.)
bool StreamFloatTensor(qd::ByteView file, const Container& container, const ContainerTensor& tensor,
                       std::size_t index, qd::TensorSink& sink);
// Plans every F32/F16/BF16/F64 tensor of an accepted container, in
// container->tensors order (other dtypes are skipped), and streams them:
// what ReadSafetensors decodes, for the readers that find the file is not
// theirs.
void StreamFloatTensors(qd::ByteView file, const Container& container, qd::TensorSink& sink);

// IEEE 754 binary16 bits -> binary32 value, exact, written bit by bit.
float HalfToFloat(std::uint16_t half);
// Element i of little-endian floating data of dtype F32, F16, BF16 or F64,
// widened to binary32 exactly (F64 rounded to nearest even).
float FloatElement(const std::string& dtype, const std::uint8_t* data, std::uint64_t i);

}  // namespace qd::oracle

#endif  // QUANTDIFF_ORACLES_SAFETENSORS_H_
