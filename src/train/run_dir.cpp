#include "train/run_dir.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <set>
#include <filesystem>
#include <fstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_file.h"
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

// The second name of a step's checkpoint, used while the first is the one `latest` names.
constexpr const char* kResavedSuffix = ".resaved";

// The checkpoint name `latest` holds ("" when there is none yet).
std::string latest_name(const fs::path& run_dir) {
  std::ifstream in(run_dir / "latest");
  std::string name;
  std::getline(in, name);
  return name;
}

}  // namespace

void save_training_checkpoint(const std::string& run_dir, const model::ModelConfig& config,
                              const std::vector<float>& params, const std::vector<float>& adam_m,
                              const std::vector<float>& adam_v, const TrainingState& state, int64_t keep) {
  const fs::path root = fs::path(run_dir) / "checkpoints";
  fs::create_directories(root);
  // The directory `latest` names is never removed nor replaced in place: saving the step it
  // already holds (a resumed run writing that step again) goes under the step's other name,
  // and `latest` moves to it atomically. A crash at any instant leaves `latest` naming a
  // complete checkpoint: the old one, or the new one.
  const std::string current = latest_name(run_dir);
  const std::string canonical = step_name(state.step);
  const std::string name = current == canonical ? canonical + kResavedSuffix : canonical;
  const fs::path tmp = root / (canonical + ".partial");
  fs::remove_all(tmp);
  io::save_checkpoint(tmp.string(), config, params);
  const int64_t n = static_cast<int64_t>(adam_m.size());
  io::write_safetensors((tmp / "optimizer.safetensors").string(),
                        {{"exp_avg", {n}, adam_m.data()}, {"exp_avg_sq", {n}, adam_v.data()}});
  write_file_atomic((tmp / "trainer_state.json").string(), training_state_to_json(state).dump(1) + "\n");
  fsync_directory(tmp.string());  // each file was fsynced as it was written
  const fs::path final_dir = root / name;
  fs::remove_all(final_dir);  // a stale copy: never the one `latest` names (see above)
  fs::rename(tmp, final_dir);
  fsync_directory(root.string());
  write_file_atomic((fs::path(run_dir) / "latest").string(), name + "\n");
  // The copy of this step that `latest` named until now.
  if (current != name && (current == canonical || current == canonical + kResavedSuffix)) fs::remove_all(root / current);
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
  for (const char* name : {"exp_avg", "exp_avg_sq"})
    if (!reader.has(name) || reader.entry(name).numel() != static_cast<int64_t>(ck.params.size()))
      fail(opt.string(), ": optimizer moment ", name, " is missing or does not match the model's ", ck.params.size(),
           " parameters");
  reader.read_f32("exp_avg", ck.adam_m);
  reader.read_f32("exp_avg_sq", ck.adam_v);
  io::require_finite(ck.adam_m.data(), static_cast<int64_t>(ck.adam_m.size()), opt.string() + ": exp_avg");
  io::require_finite(ck.adam_v.data(), static_cast<int64_t>(ck.adam_v.size()), opt.string() + ": exp_avg_sq");
  const fs::path state_path = fs::path(dir) / "trainer_state.json";
  const std::string where = state_path.string();
  ck.state = training_state_from_json(read_json_file(where, "trainer state"), where);
  const std::string dir_name = fs::path(dir).filename().string();
  if (dir_name != step_name(ck.state.step) && dir_name != step_name(ck.state.step) + kResavedSuffix)
    fail(where, ": \"step\" is ", ck.state.step, " but the checkpoint directory is ", dir_name);
  return ck;
}

nlohmann::json training_state_to_json(const TrainingState& state) {
  return {{"format_version", 1},
          {"step", state.step},
          {"tokens_seen", state.tokens_seen},
          {"elapsed_s", state.elapsed_s},
          {"planned_steps", state.planned_steps},
          {"loss_history", state.loss_history},
          {"spike_steps", state.spike_steps},
          {"train_config", state.train_config}};
}

TrainingState training_state_from_json(const nlohmann::json& js, const std::string& where) {
  if (!js.is_object()) fail(where, ": expected a JSON object");
  auto count = [&](const char* key) {
    if (!js.contains(key) || !js[key].is_number_integer() || js[key].get<int64_t>() < 0)
      fail(where, ": key \"", key, "\" must be a non-negative integer, got ",
           js.contains(key) ? js[key].dump() : std::string("nothing"));
    return js[key].get<int64_t>();
  };
  TrainingState state;
  state.step = count("step");
  state.tokens_seen = count("tokens_seen");
  state.planned_steps = count("planned_steps");
  if (!js.contains("elapsed_s") || !js["elapsed_s"].is_number() || !(js["elapsed_s"].get<double>() >= 0) ||
      !std::isfinite(js["elapsed_s"].get<double>()))
    fail(where, ": key \"elapsed_s\" must be a non-negative number");
  state.elapsed_s = js["elapsed_s"].get<double>();
  try {
    state.loss_history = js.at("loss_history").get<std::vector<double>>();
    state.spike_steps = js.at("spike_steps").get<std::vector<int64_t>>();
  } catch (const nlohmann::json::exception& e) {
    fail(where, ": malformed loss_history or spike_steps (", e.what(), ")");
  }
  for (double l : state.loss_history)
    if (!std::isfinite(l)) fail(where, ": loss_history holds a non-finite loss");
  if (js.contains("train_config") && !js["train_config"].is_null()) {
    if (!js["train_config"].is_object()) fail(where, ": key \"train_config\" must be an object");
    state.train_config = js["train_config"];
  }
  return state;
}

RunLock::RunLock(const std::string& run_dir) {
  const std::string path = (fs::path(run_dir) / ".lock").string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) fail(path, ": cannot create the run's lock file (", std::strerror(errno), ")");
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char buf[32] = {};
    const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
    ::close(fd_);
    fd_ = -1;
    const std::string holder = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("?");
    const std::string holder_pid = holder.substr(0, holder.find_first_of("\n"));
    if (err == EWOULDBLOCK && holder_pid == std::to_string(::getpid()))  // a train inside another's callback
      fail(run_dir, ": this process is already writing this run directory (a training in progress here: another "
           "thread's, or the one whose callback this call runs in); give this one another directory");
    if (err == EWOULDBLOCK)
      fail(run_dir, ": another gatedlm process (pid ", holder_pid,
           ") is writing this run directory; wait for it or stop it (lock file ", path, ")");
    fail(path, ": cannot lock (", std::strerror(err), ")");
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, pid.data(), pid.size(), 0) < 0) {
    // the pid is only informative
  }
  remove_stale_temporaries(run_dir);
}

void remove_stale_temporaries(const std::string& run_dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(run_dir, ec)) {
    // core/atomic_file.h's "<name>.tmp.<pid>", left by a writer killed before its rename.
    const std::string name = e.path().filename().string();
    const size_t at = name.rfind(".tmp.");
    if (at == std::string::npos || at == 0 || !e.is_regular_file(ec)) continue;
    const std::string digits = name.substr(at + 5);
    if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t writer = static_cast<pid_t>(std::stol(digits));
    if (writer == ::getpid() || ::kill(writer, 0) == 0 || errno != ESRCH) continue;  // still alive (or unknown)
    fs::remove(e.path(), ec);
  }
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

bool is_unstarted_run(const std::string& run_dir) {
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec) || fs::exists(fs::path(run_dir) / "latest", ec)) return false;
  static const std::set<std::string> written_at_start = {"config.json", "train_config.json", "run.json",
                                                         "metrics.jsonl", "summary.json", ".lock"};
  for (const auto& e : fs::directory_iterator(run_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name == "checkpoints" && e.is_directory()) {
      for (const auto& c : fs::directory_iterator(e.path(), ec))
        if (!c.path().filename().string().ends_with(".partial")) return false;
      continue;
    }
    if (!written_at_start.count(name) && !name.starts_with("config.json.tmp.") &&
        !name.starts_with("train_config.json.tmp.") && !name.starts_with("run.json.tmp."))
      return false;
  }
  return !ec;
}

void clear_unstarted_run(const std::string& run_dir) {
  for (const auto& e : fs::directory_iterator(run_dir))
    if (e.path().filename() != ".lock") fs::remove_all(e.path());
}

}  // namespace gatedlm::train
