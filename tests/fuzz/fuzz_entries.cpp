#include "fuzz_entries.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "analysis/report.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "io/token_dataset.h"
#include "io/token_ids.h"
#include "io/tokenizer.h"
#include "model/config.h"
#include "model/param_layout.h"

namespace gatedlm::fuzz {
namespace {

namespace fs = std::filesystem;

// A scratch directory per process, reused by every input.
const fs::path& scratch() {
  static const fs::path dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    fs::path d = fs::path(tmp && *tmp ? tmp : "/tmp") / ("gatedlm_fuzz_" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

fs::path write(const std::string& name, const uint8_t* data, size_t size) {
  const fs::path p = scratch() / name;
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                             static_cast<std::streamsize>(size));
  return p;
}

// Runs f; a gatedlm::Error is a refusal (fine), anything else propagates and is a finding.
template <typename F>
void refusals_allowed(F&& f) {
  try {
    f();
  } catch (const Error&) {
  }
}

void safetensors(const uint8_t* data, size_t size) {
  const fs::path p = write("t.safetensors", data, size);
  refusals_allowed([&] {
    io::SafetensorsReader r(p.string());
    for (const auto& [name, e] : r.tensors())
      if (e.dtype == "F32" && e.numel() <= (1 << 20)) {
        std::vector<float> v;
        r.read_f32(name, v);
      }
  });
}

void config_json(const uint8_t* data, size_t size) {
  const fs::path p = write("config.json", data, size);
  refusals_allowed([&] {
    const model::ModelConfig c = model::load_config(p.string());
    const model::ParamLayout layout(c);
    (void)layout.total();
    (void)model::config_from_json(model::config_to_json(c), "round trip");
  });
}

// [u32 manifest bytes][manifest.json][u32 train bytes][train.bin][val.bin = the rest]
void dataset(const uint8_t* data, size_t size) {
  const fs::path dir = scratch() / "dataset";
  fs::remove_all(dir);
  fs::create_directories(dir);
  size_t at = 0;
  auto part = [&](const char* name, bool rest) {
    uint32_t n = static_cast<uint32_t>(size - at);
    if (!rest) {
      if (size - at < 4) return;
      std::memcpy(&n, data + at, 4);
      at += 4;
      n = static_cast<uint32_t>(std::min<size_t>(n, size - at));
    }
    std::ofstream(dir / name, std::ios::binary).write(reinterpret_cast<const char*>(data + at), n);
    at += n;
  };
  part("manifest.json", false);
  part("train.bin", false);
  part("val.bin", true);
  refusals_allowed([&] {
    const io::TokenDataset ds = io::TokenDataset::open(dir.string());
    (void)ds.load_split("train");
    (void)ds.load_split("val");
  });
}

void token_ids(const uint8_t* data, size_t size) {
  const fs::path p = write("ids.txt", data, size);
  refusals_allowed([&] { (void)io::read_token_ids(p.string(), io::TokenIdLimits{258, 64, 2, "max_seq_len"}); });
}

void tokenizer_model(const uint8_t* data, size_t size) {
  const fs::path p = write("tokenizer.model", data, size);
  refusals_allowed([&] {
    const auto t = io::Tokenizer::load(p.string());
    const std::vector<int32_t> ids = t->encode("Hello, world. The pass key is 31415.");
    (void)t->decode(ids);
  });
}

void report_analysis(const uint8_t* data, size_t size) {
  const fs::path p = write("analysis.json", data, size);
  refusals_allowed([&] {
    analysis::ReportOptions o;
    o.inputs = {p.string()};
    o.out_dir = (scratch() / "report").string();
    o.gnuplot = "/bin/true";  // everything but the drawing
    (void)analysis::render_report(o);
  });
}

}  // namespace

const std::vector<Target>& targets() {
  static const std::vector<Target> all{{"safetensors", safetensors},         {"config_json", config_json},
                                       {"dataset", dataset},                 {"token_ids", token_ids},
                                       {"tokenizer_model", tokenizer_model}, {"report_analysis", report_analysis}};
  return all;
}

Entry find_target(const std::string& name) {
  for (const Target& t : targets())
    if (name == t.name) return t.entry;
  return nullptr;
}

}  // namespace gatedlm::fuzz
