#include "sweep/spec.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <set>

#include "core/error.h"
#include "core/json_file.h"
#include "io/named_config.h"
#include "model/param_layout.h"

namespace gatedlm::sweep {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Keys the sweep plans itself: a spec or a variant setting them would break "the same
// budget and schedule for every run".
const char* const kPlannedTrainKeys[] = {"steps", "tokens", "minutes", "warmup", "eval_every",
                                         "save_every", "seed", "probe_every", "probe_windows"};

void check_keys(const json& j, const std::set<std::string>& known, const std::string& where) {
  for (const auto& [k, v] : j.items())
    if (!known.count(k)) {
      std::string list;
      for (const auto& n : known) list += (list.empty() ? "" : ", ") + n;
      fail(where, ": unknown key \"", k, "\" (known: ", list, ")");
    }
}

template <typename T>
T field_of(const json& j, const char* key, T fallback, const std::string& where) {
  if (!j.contains(key)) return fallback;
  const json& v = j[key];
  if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) fail(where, ": \"", key, "\" must be a string, got ", v.dump());
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) fail(where, ": \"", key, "\" must be a number, got ", v.dump());
  } else {
    if (!v.is_number_integer()) fail(where, ": \"", key, "\" must be an integer, got ", v.dump());
  }
  return v.get<T>();
}

void check_train_patch(const json& t, const std::string& where) {
  if (!t.is_object()) fail(where, ": must be an object of training keys");
  for (const char* k : kPlannedTrainKeys)
    if (t.contains(k))
      fail(where, ": \"", k, "\" is planned by the sweep (use the spec's tokens, seeds, warmup_fraction, evals, "
                  "probe_every)");
}

Variant parse_variant(const json& v, const std::string& where) {
  if (!v.is_object()) fail(where, ": a variant is an object (or the path of a file holding one)");
  check_keys(v, {"name", "label", "series", "model", "train", "match", "baseline", "description"}, where);
  Variant out;
  out.name = field_of<std::string>(v, "name", "", where);
  if (out.name.empty()) fail(where, ": \"name\" is required");
  for (char c : out.name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
      fail(where, ": name \"", out.name, "\" may hold only letters, digits, '-', '_' and '.' (it names a directory)");
  const std::string at = where + " (\"" + out.name + "\")";
  out.label = field_of<std::string>(v, "label", out.name, at);
  out.series = field_of<std::string>(v, "series", "", at);
  out.compare_to = field_of<std::string>(v, "baseline", "", at);
  if (v.contains("model")) {
    if (!v["model"].is_object()) fail(at, ": \"model\" must be an object (a patch of the base model config)");
    if (v["model"].contains("vocab_size")) fail(at, ": model.vocab_size cannot differ between variants");
    out.model = v["model"];
  }
  if (v.contains("train")) {
    check_train_patch(v["train"], at + ": train");
    out.train = v["train"];
  }
  if (v.contains("match")) {
    const json& m = v["match"];
    if (m == "baseline") out.match = Match::baseline;
    else if (m == "none") out.match = Match::none;
    else if (m.is_object() && m.size() == 1 && m.contains("added_by") && m["added_by"].is_object()) {
      out.match = Match::added_by;
      out.added_by = m["added_by"];
    } else {
      fail(at, ": \"match\" must be \"baseline\", \"none\" or {\"added_by\": MODEL_PATCH}, got ", m.dump());
    }
  }
  return out;
}

}  // namespace

void check_seeds(const std::vector<uint64_t>& seeds, const std::string& where) {
  if (seeds.size() > kMaxSeeds) fail(where, ": ", seeds.size(), " seeds, more than ", kMaxSeeds);
  std::set<uint64_t> seen;
  for (uint64_t seed : seeds)
    if (!seen.insert(seed).second) fail(where, ": seed ", seed, " is listed twice");
}

namespace {

// "seeds": a non-empty list of distinct integers >= 0, at most kMaxSeeds.
std::vector<uint64_t> parse_seed_list(const json& seeds, const std::string& source) {
  if (!seeds.is_array() || seeds.empty()) fail(source, ": \"seeds\" must be a non-empty list of integers >= 0");
  if (seeds.size() > kMaxSeeds) fail(source, ": \"seeds\" lists ", seeds.size(), " seeds, more than ", kMaxSeeds);
  std::vector<uint64_t> out;
  for (const json& x : seeds) {
    if (!x.is_number_integer() || (!x.is_number_unsigned() && x.get<int64_t>() < 0))
      fail(source, ": \"seeds\": ", x.dump(), " is not an integer >= 0");
    out.push_back(x.get<uint64_t>());
  }
  check_seeds(out, source + ": \"seeds\"");
  return out;
}

// "variants": objects, or names of variant files relative to the spec's directory (whose
// contents replace the name in s.raw); appended to s.variants. Returns the names, each once.
std::set<std::string> parse_variant_list(const json& variants, const std::string& source, const std::string& dir,
                                         SweepSpec& s) {
  std::set<std::string> names;
  for (size_t i = 0; i < variants.size(); ++i) {
    const json& v = variants[i];
    const std::string where = cat(source, ": variants[", i, "]");
    Variant parsed;
    if (v.is_string()) {
      std::string file = v.get<std::string>();
      if (fs::path(file).is_relative() && !dir.empty()) file = (fs::path(dir) / file).string();
      const json loaded = read_json_file(file, "variant file");
      parsed = parse_variant(loaded, file);
      s.raw["variants"][i] = loaded;
    } else {
      parsed = parse_variant(v, where);
    }
    if (!names.insert(parsed.name).second) fail(where, ": variant name \"", parsed.name, "\" is used twice");
    s.variants.push_back(std::move(parsed));
  }
  return names;
}

}  // namespace

SweepSpec parse_spec(const json& j, const std::string& source, const std::string& dir) {
  if (!j.is_object()) fail(source, ": a sweep spec is a JSON object");
  check_keys(j,
             {"description", "base", "train", "tokens", "seeds", "warmup_fraction", "evals", "probe_every",
              "probe_windows", "final_windows", "heldout_tokens", "data", "heldout", "baseline", "variants",
              "variants_from"},
             source);
  SweepSpec s;
  s.source = source;
  s.raw = j;
  s.description = field_of<std::string>(j, "description", "", source);
  if (!j.contains("base") || !j["base"].is_object()) fail(source, ": \"base\" (a model config) is required");
  s.base = j["base"];
  s.train = j.value("train", json::object());
  check_train_patch(s.train, source + ": train");
  s.tokens = field_of<int64_t>(j, "tokens", 0, source);
  if (s.tokens < 1) fail(source, ": \"tokens\" (training tokens per run) must be a positive integer");
  if (j.contains("seeds")) s.seeds = parse_seed_list(j["seeds"], source);
  s.warmup_fraction = field_of<double>(j, "warmup_fraction", s.warmup_fraction, source);
  if (!(s.warmup_fraction >= 0 && s.warmup_fraction < 1)) fail(source, ": \"warmup_fraction\" must be in [0, 1)");
  s.evals = field_of<int64_t>(j, "evals", s.evals, source);
  s.probe_every = field_of<int64_t>(j, "probe_every", s.probe_every, source);
  s.probe_windows = field_of<int64_t>(j, "probe_windows", s.probe_windows, source);
  s.final_windows = field_of<int64_t>(j, "final_windows", s.final_windows, source);
  s.heldout_tokens = field_of<int64_t>(j, "heldout_tokens", s.heldout_tokens, source);
  if (s.evals < 1 || s.probe_every < 0 || s.probe_windows < 1 || s.final_windows < 1 || s.heldout_tokens < 1)
    fail(source, ": evals, probe_windows, final_windows and heldout_tokens must be >= 1, probe_every >= 0");
  auto path_key = [&](const char* key) {
    std::string p = field_of<std::string>(j, key, "", source);
    if (!p.empty() && p != "none" && fs::path(p).is_relative() && !dir.empty()) p = (fs::path(dir) / p).string();
    return p;
  };
  s.data = path_key("data");
  s.heldout = path_key("heldout");
  // "variants_from": another spec file whose variants this one runs (on its own base and budget).
  if (j.contains("variants_from")) {
    if (j.contains("variants")) fail(source, ": give \"variants\" or \"variants_from\", not both");
    std::string file = field_of<std::string>(j, "variants_from", "", source);
    if (fs::path(file).is_relative() && !dir.empty()) file = (fs::path(dir) / file).string();
    const json other = read_json_file(file, "sweep spec (variants_from)");
    if (!other.is_object() || !other.contains("variants")) fail(file, ": no \"variants\" (named by ", source, ")");
    json merged = j;
    merged.erase("variants_from");
    merged["variants"] = other["variants"];
    if (!j.contains("baseline") && other.contains("baseline")) merged["baseline"] = other["baseline"];
    return parse_spec(merged, source, fs::path(file).parent_path().string());
  }
  if (!j.contains("variants") || !j["variants"].is_array() || j["variants"].empty())
    fail(source, ": \"variants\" must be a non-empty list");
  const std::set<std::string> names = parse_variant_list(j["variants"], source, dir, s);
  s.baseline = field_of<std::string>(j, "baseline", s.variants.front().name, source);
  if (!names.count(s.baseline)) fail(source, ": \"baseline\": no variant named \"", s.baseline, "\"");
  for (const Variant& v : s.variants)
    if (!v.compare_to.empty() && !names.count(v.compare_to))
      fail(source, ": variant \"", v.name, "\": \"baseline\": no variant named \"", v.compare_to, "\"");
  return s;
}

SweepSpec load_spec_file(const std::string& path) {
  const json j = read_json_file(path, "sweep spec");
  return parse_spec(j, path, fs::path(path).parent_path().string());
}

std::string find_sweep_preset(const std::string& name) { return io::find_named_config("sweep", "sweep", name); }

const PlannedVariant& Plan::find(const std::string& name) const {
  for (const PlannedVariant& v : variants)
    if (v.variant.name == name) return v;
  fail("sweep: no variant named \"", name, "\"");
}

namespace {

int64_t total_params(const json& config, const std::string& where) {
  return model::ParamLayout(model::config_from_json(config, where)).total();
}

}  // namespace

int64_t ffn_width_for(const json& config, int64_t target, const std::string& where) {
  json c = config;
  const int64_t f0 = c.at("ffn_hidden").get<int64_t>();
  // The total is linear in the width: per_column parameters per FFN column.
  c["ffn_hidden"] = f0 + 1;
  const int64_t t1 = total_params(c, where);
  c["ffn_hidden"] = f0;
  const int64_t t0 = total_params(c, where);
  const int64_t per_column = t1 - t0;
  if (per_column <= 0) return f0;
  const double exact = static_cast<double>(f0) + static_cast<double>(target - t0) / static_cast<double>(per_column);
  int64_t best = std::max<int64_t>(1, static_cast<int64_t>(std::floor(exact)));
  int64_t best_diff = INT64_MAX;
  for (int64_t f = std::max<int64_t>(1, best - 1); f <= best + 2; ++f) {
    const int64_t diff = std::llabs(t0 + (f - f0) * per_column - target);
    if (diff < best_diff) best_diff = diff, best = f;
  }
  const int64_t got = t0 + (best - f0) * per_column;
  if (best == 1 && got - target > per_column)
    fail(where, ": matching ", target, " parameters would need an FFN narrower than one column (", got - target,
         " too many at ffn_hidden 1); use \"match\": \"none\" or a wider base ffn_hidden");
  return best;
}

Plan plan_variants(const SweepSpec& spec, int64_t vocab_size) {
  Plan plan;
  json base = spec.base;
  if (!base.contains("vocab_size")) base["vocab_size"] = vocab_size;
  plan.base = model::config_from_json(base, spec.source + ": base");
  plan.base_params = model::ParamLayout(plan.base).total();
  for (const Variant& v : spec.variants) {
    const std::string where = cat(spec.source, ": variant \"", v.name, "\"");
    json c = base;
    c.merge_patch(v.model);
    model::config_from_json(c, where);  // a patch that breaks the config is the variant's fault
    PlannedVariant p;
    p.variant = v;
    switch (v.match) {
      case Match::none: p.target_params = total_params(c, where); break;
      case Match::baseline: p.target_params = plan.base_params; break;
      case Match::added_by: {
        json added = base;
        added.merge_patch(v.added_by);
        p.target_params = plan.base_params + (total_params(added, where + " (match.added_by)") - plan.base_params);
        break;
      }
    }
    if (v.match != Match::none) c["ffn_hidden"] = ffn_width_for(c, p.target_params, where);
    p.config = model::config_from_json(c, where);
    const model::ParamLayout layout(p.config);
    p.params = layout.total();
    p.gate_params = layout.count(model::ParamKind::gate);
    plan.variants.push_back(std::move(p));
  }
  return plan;
}

train::TrainConfig train_config_for(const SweepSpec& spec, const Variant& v, uint64_t seed) {
  json t = spec.train;
  t.merge_patch(v.train);
  t["seed"] = seed;
  t["steps"] = 1;  // placeholder: tokens_per_step needs the batch shape first
  train::TrainConfig c = train::train_config_from_json(t, cat(spec.source, ": train (variant \"", v.name, "\")"));
  const int64_t steps = std::max<int64_t>(1, (spec.tokens + c.tokens_per_step() - 1) / c.tokens_per_step());
  c.steps = steps;
  c.tokens = 0;
  c.warmup = std::max<int64_t>(1, std::llround(spec.warmup_fraction * static_cast<double>(steps)));
  c.eval_every = std::max<int64_t>(1, (steps + spec.evals - 1) / spec.evals);
  c.save_every = c.eval_every;
  c.keep_checkpoints = 1;
  c.probe_every = spec.probe_every;
  c.probe_windows = spec.probe_windows;
  c.validate();
  return c;
}

}  // namespace gatedlm::sweep
