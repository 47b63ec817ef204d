// The one list of model families (io/model_family.h): every family gatedlm reads and writes,
// each defined in its own file. The order is the order of --format's help and of detection
// ties; a new family is one line here.
#include <algorithm>
#include <mutex>

#include "core/error.h"
#include "io/model_family.h"

namespace gatedlm::io {

extern const ModelFamily kPaperFamily;      // io/family_paper.cpp
extern const ModelFamily kQwen3Family;      // io/family_qwen3.cpp
extern const ModelFamily kQwen3MoeFamily;   // io/family_qwen3_moe.cpp
extern const ModelFamily kQwen3NextFamily;  // io/family_qwen3_next.cpp
extern const ModelFamily kQwen35Family;     // io/family_qwen3_5.cpp
extern const ModelFamily kQwen35MoeFamily;  // io/family_qwen3_5_moe.cpp

namespace {

const ModelFamily* const kRegistered[] = {&kPaperFamily,     &kQwen3Family,  &kQwen3MoeFamily,
                                          &kQwen3NextFamily, &kQwen35Family, &kQwen35MoeFamily};

// Families a test registers for its lifetime (ScopedFamilyRegistration).
std::mutex& extra_mutex() {
  static std::mutex m;
  return m;
}
std::vector<const ModelFamily*>& extra_families() {
  static std::vector<const ModelFamily*> extra;
  return extra;
}

}  // namespace

std::vector<const ModelFamily*> model_families() {
  std::vector<const ModelFamily*> out(std::begin(kRegistered), std::end(kRegistered));
  const std::lock_guard<std::mutex> lock(extra_mutex());
  out.insert(out.end(), extra_families().begin(), extra_families().end());
  return out;
}

const ModelFamily* find_family(const std::string& name) {
  for (const ModelFamily* f : model_families())
    if (name == f->name) return f;
  return nullptr;
}

const ModelFamily* find_gguf_family(const std::string& arch) {
  for (const ModelFamily* f : model_families())
    if (f->gguf && arch == f->gguf->name) return f;
  return nullptr;
}

const ModelFamily& detect_family(const nlohmann::json& hf) {
  const ModelFamily* best = nullptr;
  Claim strongest = Claim::none;
  for (const ModelFamily* f : model_families()) {
    const Claim claim = f->claim(hf);
    if (claim > strongest) best = f, strongest = claim;
  }
  if (!best) fail("internal error: no model family claims the config (qwen3's claims any)");
  return *best;
}

std::vector<const GgufArchitecture*> gguf_architectures() {
  std::vector<const GgufArchitecture*> out;
  for (const bool by_auto : {true, false})
    for (const ModelFamily* f : model_families())
      if (f->gguf && f->gguf->chosen_by_auto == by_auto) out.push_back(f->gguf);
  return out;
}

std::string join_names(const std::vector<std::string>& names, const std::string& last_separator) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " " + last_separator + " " : ", ") + names[i];
  return out;
}

std::string family_names(const std::string& separator) {
  std::string out;
  for (const ModelFamily* f : model_families()) out += (out.empty() ? "" : separator) + f->name;
  return out;
}

std::string gguf_architecture_names(const std::string& separator) {
  std::string out;
  for (const GgufArchitecture* a : gguf_architectures()) out += (out.empty() ? "" : separator) + a->name;
  return out;
}

ScopedFamilyRegistration::ScopedFamilyRegistration(const ModelFamily& family) : family_(&family) {
  if (find_family(family.name)) fail("model family \"", family.name, "\" is already registered");
  const std::lock_guard<std::mutex> lock(extra_mutex());
  extra_families().push_back(family_);
}

ScopedFamilyRegistration::~ScopedFamilyRegistration() {
  const std::lock_guard<std::mutex> lock(extra_mutex());
  std::vector<const ModelFamily*>& extra = extra_families();
  extra.erase(std::remove(extra.begin(), extra.end(), family_), extra.end());
}

}  // namespace gatedlm::io
