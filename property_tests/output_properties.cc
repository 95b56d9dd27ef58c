// output_properties.cc: what quantdiff writes, it accepts (issue 9 section 2).
//
//  * decode: for a generated valid instance of every format, the F32
//    safetensors file the decode writer makes from the codec's stream is
//    accepted by exactly what `quantdiff check` runs (detection, then the
//    detected format's codec_check), and holds every decoded value.
//  * convert: for a generated valid GPTQ instance and every target format,
//    the conversion either writes a file that `check` accepts with the config
//    written beside it, or is refused only because the target cannot hold a
//    zero point or width (docs/gptq.md section 9) — never because its own
//    output would fail check or read otherwise in the oracle.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "cli/convert.h"
#include "cli/decoded_output.h"
#include "harness/registry.h"

namespace {

using qd::harness::FormatEntry;

RC_GTEST_PROP(OutputProperties, DecodeOutputPassesCheck, (std::uint64_t seed)) {
  for (const FormatEntry& f : qd::harness::Formats()) {
    qd::harness::Rng rng(seed);
    const qd::harness::Generated g = f.generate_valid(rng);
    const qd::ByteView input{g.bytes.data(), g.bytes.size()};
    std::string written;
    qd::cli::SafetensorsF32Sink sink(
        [&](const void* data, std::size_t size) {
          written.append(static_cast<const char*>(data), size);
          return true;
        },
        "out.safetensors");
    const qd::Outcome decoded = f.codec_stream(input, "in" + std::string(f.file_extension),
                                               g.side_files, sink);
    RC_ASSERT(!decoded.refused);
    RC_ASSERT(!sink.finding().has_value());
    const qd::ByteView output{reinterpret_cast<const std::uint8_t*>(written.data()),
                              written.size()};
    std::string error;
    const FormatEntry* read_as = nullptr;
    const auto check = qd::cli::CheckVerbOutcome(output, "out.safetensors", {}, nullptr,
                                                 &read_as, &error);
    RC_ASSERT(check.has_value());
    if (check->refused) {
      RC_FAIL(std::string(f.name) + " output read as " + std::string(read_as->name) +
              " is refused: " + check->findings.back().rule + " " + check->findings.back().message);
    }
    // Every value the codec decoded is in the file, in order, as F32 bits.
    const qd::Outcome again = f.codec_read(input, "in" + std::string(f.file_extension), g.side_files);
    std::uint64_t total = 0;
    for (const qd::DecodedTensor& t : again.tensors) total += t.values.size();
    RC_ASSERT(total * 4 <= written.size());
    std::size_t at = written.size() - total * 4;
    for (const qd::DecodedTensor& t : again.tensors) {
      if (!t.values.empty()) {
        RC_ASSERT(std::memcmp(written.data() + at, t.values.data(), t.values.size() * 4) == 0);
      }
      at += t.values.size() * 4;
    }
  }
}

RC_GTEST_PROP(OutputProperties, ConvertOutputPassesCheck, (std::uint64_t seed)) {
  const FormatEntry& gptq = *qd::harness::FindFormat("gptq");
  qd::harness::Rng rng(seed);
  const qd::harness::Generated g = gptq.generate_valid(rng);
  const qd::ByteView input{g.bytes.data(), g.bytes.size()};
  for (const qd::codec::GptqFormat target :
       {qd::codec::GptqFormat::kV1, qd::codec::GptqFormat::kV2, qd::codec::GptqFormat::kPlanar}) {
    qd::cli::GptqConversion converted;
    std::string error;
    // A fresh folder: beside OUT there is only the config convert writes.
    const int verdict = qd::cli::ConvertGptq(
        input, "model.safetensors", g.side_files, target, "out.safetensors",
        [](const qd::harness::SideFiles& pending, qd::harness::SideFiles* found, std::string*) {
          *found = pending;
          return true;
        },
        &converted, &error);
    RC_ASSERT(verdict == 0 || verdict == 1);
    if (verdict == 1) {
      RC_ASSERT(converted.refusal == qd::cli::ConvertRefusal::kTargetCannotHold);
      continue;
    }
    const qd::harness::SideFiles beside = {
        {converted.config_path,
         std::vector<std::uint8_t>(converted.config_text.begin(), converted.config_text.end())}};
    const qd::ByteView output{converted.file.data(), converted.file.size()};
    const FormatEntry* read_as = nullptr;
    const auto check =
        qd::cli::CheckVerbOutcome(output, "out.safetensors", beside, nullptr, &read_as, &error);
    RC_ASSERT(check.has_value());
    RC_ASSERT(read_as == &gptq);
    RC_ASSERT(!check->refused);
  }
}

}  // namespace
