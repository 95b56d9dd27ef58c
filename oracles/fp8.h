// fp8.h: the reference reader for FP8 weight checkpoints (spec 004 "FP8"),
// written plainly from docs/fp8.md: every code is decoded from its sign,
// exponent and mantissa fields, every weight is one binary32 division by
// its inverse scale. Shares no code with codecs/; the differential tests
// compare the two bit for bit.
//
//   qd::Outcome o = qd::oracle::ReadFp8File(bytes, "m.safetensors", configs);
#ifndef QUANTDIFF_ORACLES_FP8_H_
#define QUANTDIFF_ORACLES_FP8_H_

#include <cstdint>
#include <string>
#include <vector>

#include "oracles/merged_table.h"
#include "oracles/claim_input.h"
#include "quantdiff/plain_data.h"
#include "quantdiff/tensor_sink.h"

namespace qd::oracle {

// docs/fp8.md section 4: the value of CODE under SUBTYPE (a canonical name,
// "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz" or
// "float8_e8m0fnu"), from its bit fields. *is_nan / *is_infinite say what
// the code is; the value is then a NaN / an infinity. False for an unknown
// subtype.
bool DecodeFp8Code(const std::string& subtype, std::uint8_t code, float* value, bool* is_nan,
                   bool* is_infinite);

// docs/fp8.md section 9: for each value x of VALUES, the code of SUBTYPE
// nearest to x (after clamping to the largest finite value; ties to the
// even mantissa field; zero keeps x's sign where the subtype has -0.0; a NaN
// to the smallest NaN code), chosen among all 256 codes as DecodeFp8Code
// reads them. False for "float8_e8m0fnu" (not encoded) and unknown subtypes.
bool EncodeFp8Codes(const std::string& subtype, const std::vector<float>& values,
                    std::vector<std::uint8_t>* codes);

// The safetensors rules, then docs/fp8.md sections 3 and 5; the outcome's
// tensors are section 7's.
qd::Outcome ReadFp8File(qd::ByteView file, const std::string& file_name,
                        const std::vector<qd::SideFile>& configs);
qd::Outcome StreamFp8File(qd::ByteView file, const std::string& file_name,
                          const std::vector<qd::SideFile>& configs, qd::TensorSink& sink);

// docs/fp8.md section 2, Detection.
bool IsFp8File(const ClaimInput& input);
// The same over a table (one file, or a model directory's merged table).
bool HasFp8Layer(const MergedTable& table);
// Sections 3, 5 and 7 over a table of accepted containers: findings
// appended to *outcome (naming FILE_NAME), false at the first error; else
// the plan and tensors to SINK.
bool StreamFp8Table(const MergedTable& table, const std::string& file_name,
                    const std::vector<qd::SideFile>& configs, qd::Outcome* outcome,
                    qd::TensorSink& sink);

}  // namespace qd::oracle

#endif  // QUANTDIFF_ORACLES_FP8_H_
