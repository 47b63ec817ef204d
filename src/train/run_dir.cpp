#include "train/run_dir.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"

namespace gatedlm::train {

namespace fs = std::filesystem;

namespace {

std::string step_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%08lld", static_cast<long long>(step));
  return buf;
}

}  // namespace

void save_training_checkpoint(const std::string& run_dir, const model::ModelConfig& config,
                              const std::vector<float>& params, const std::vector<float>& adam_m,
                              const std::vector<float>& adam_v, const TrainingState& state, int64_t keep) {
  const fs::path root = fs::path(run_dir) / "checkpoints";
  fs::create_directories(root);
  const std::string name = step_name(state.step);
  const fs::path tmp = root / (name + ".partial");
  fs::remove_all(tmp);
  io::save_checkpoint(tmp.string(), config, params);
  const int64_t n = static_cast<int64_t>(adam_m.size());
  io::write_safetensors((tmp / "optimizer.safetensors").string(),
                        {{"exp_avg", {n}, adam_m.data()}, {"exp_avg_sq", {n}, adam_v.data()}});
  write_file_atomic((tmp / "trainer_state.json").string(), training_state_to_json(state).dump(1) + "\n");
  fsync_directory(tmp.string());  // each file was fsynced as it was written
  const fs::path final_dir = root / name;
  fs::remove_all(final_dir);
  fs::rename(tmp, final_dir);
  fsync_directory(root.string());
  write_file_atomic((fs::path(run_dir) / "latest").string(), name + "\n");
  // Prune the oldest complete checkpoints beyond `keep`, and stale partial ones.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(root)) {
    const std::string n2 = e.path().filename().string();
    if (n2.size() > 8 && n2.ends_with(".partial")) {
      fs::remove_all(e.path());
      continue;
    }
    if (n2.starts_with("step_")) names.push_back(n2);
  }
  std::sort(names.begin(), names.end());
  for (size_t i = 0; i + keep < names.size(); ++i)
    if (names[i] != name) fs::remove_all(root / names[i]);
}

TrainingCheckpoint load_training_checkpoint(const std::string& run_dir) {
  const std::string dir = io::resolve_checkpoint_dir(run_dir);
  TrainingCheckpoint ck;
  io::Checkpoint weights = io::load_checkpoint(dir);
  ck.config = weights.config;
  ck.params = std::move(weights.params);
  const fs::path opt = fs::path(dir) / "optimizer.safetensors";
  if (!fs::exists(opt)) fail(dir, ": no optimizer.safetensors (not a training checkpoint)");
  io::SafetensorsReader reader(opt.string());
  reader.read_f32("exp_avg", ck.adam_m);
  reader.read_f32("exp_avg_sq", ck.adam_v);
  if (ck.adam_m.size() != ck.params.size() || ck.adam_v.size() != ck.params.size())
    fail(opt.string(), ": optimizer moments do not match the model's ", ck.params.size(), " parameters");
  const fs::path state_path = fs::path(dir) / "trainer_state.json";
  std::ifstream in(state_path);
  if (!in) fail(state_path.string(), ": missing");
  nlohmann::json js;
  try {
    js = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail(state_path.string(), ": malformed (", e.what(), ")");
  }
  ck.state = training_state_from_json(js, state_path.string());
  return ck;
}

nlohmann::json training_state_to_json(const TrainingState& state) {
  return {{"format_version", 1},
          {"step", state.step},
          {"tokens_seen", state.tokens_seen},
          {"elapsed_s", state.elapsed_s},
          {"planned_steps", state.planned_steps},
          {"loss_history", state.loss_history},
          {"spike_steps", state.spike_steps}};
}

TrainingState training_state_from_json(const nlohmann::json& js, const std::string& source) {
  TrainingState state;
  try {
    state.step = js.at("step").get<int64_t>();
    state.tokens_seen = js.at("tokens_seen").get<int64_t>();
    state.elapsed_s = js.at("elapsed_s").get<double>();
    state.planned_steps = js.at("planned_steps").get<int64_t>();
    state.loss_history = js.at("loss_history").get<std::vector<double>>();
    state.spike_steps = js.at("spike_steps").get<std::vector<int64_t>>();
  } catch (const nlohmann::json::exception& e) {
    fail(source, ": malformed (", e.what(), ")");
  }
  return state;
}

}  // namespace gatedlm::train
