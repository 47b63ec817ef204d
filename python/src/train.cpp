// gatedlm.train: train::run_training, the loop `gatedlm train` runs, with each metrics.jsonl
// record handed to a Python callback as it is written.
#include <filesystem>
#include <optional>

#include "analysis/training_probe.h"
#include "common.h"
#include "core/json_file.h"
#include "io/token_dataset.h"
#include "train/trainer.h"

namespace gatedlm::python {

namespace {

// The hyper-parameters as `gatedlm train` merges them: the training-config file (or dict)
// first, then every flag given on top; all of them count as given explicitly.
void merge_hyper_parameters(train::TrainRequest& req, const py::object& train_config, const py::kwargs& flags) {
  nlohmann::json merged = nlohmann::json::object();
  std::string source = "flags";
  if (py::isinstance<py::dict>(train_config)) {
    merged = from_python(train_config, "train_config");
    source = "train_config";
  } else if (!train_config.is_none()) {
    source = path_string(train_config);
    merged = naming_missing_path(source, [&] { return read_json_file(source, "training config"); });
  }
  train::train_config_from_json(merged, source);  // reject unknown keys early, naming the file
  for (const auto& [key, value] : flags) merged[std::string(py::str(key))] = from_python(value, py::str(key));
  for (const auto& item : merged.items()) req.explicit_flags.push_back(item.key());
  req.config = train::train_config_from_json(merged, flags.empty() ? source : "flags");
}

// What a callback did: raised (the exception, re-raised after the run is saved) or asked to stop.
struct CallbackState {
  std::optional<py::error_already_set> error;
  bool stop_requested = false;
};

py::dict train_run(const py::object& config, const py::object& data, const py::object& out, const py::object& callback,
                   bool resume, const py::object& init_from, const py::object& train_config, const py::kwargs& flags) {
  train::TrainRequest req;
  req.out = path_string(out);
  req.resume = resume;
  if (!config.is_none()) req.model_config = path_string(config);
  if (!data.is_none()) req.data = path_string(data);
  if (!init_from.is_none()) req.init_from = path_string(init_from);
  merge_hyper_parameters(req, train_config, flags);
  req.probe = analysis::make_training_probe();  // used when probe_every > 0
  CallbackState state;
  if (!callback.is_none())
    req.on_record = [&](const nlohmann::json& rec) {  // false: this run stops, checkpointed and resumable
      AcquireGil acquire;
      if (state.error) return false;
      try {
        const py::object answer = callback(to_python(rec));
        if (answer.is(py::bool_(false))) state.stop_requested = true;
        return !state.stop_requested;
      } catch (py::error_already_set& e) {
        state.error.emplace(std::move(e));
        return false;
      }
    };
  train::TrainOutcome outcome;
  {
    ReleaseGil release;
    try {
      outcome = train::run_training(req);
    } catch (const Error& e) {
      for (const std::string& p : {req.model_config, req.data, req.init_from, req.resume ? req.out : std::string()})
        if (!p.empty() && !std::filesystem::exists(p)) throw MissingPath(e.what());
      throw;
    }
  }
  if (state.error) throw std::move(*state.error);
  if (outcome == train::TrainOutcome::interrupted && !state.stop_requested) {
    PyErr_SetString(PyExc_KeyboardInterrupt, "training interrupted: the run is saved; continue with resume=True");
    throw py::error_already_set();
  }
  const auto summary = std::filesystem::path(req.out) / "summary.json";
  py::dict result = py::dict(to_python(read_json_file(summary.string(), "run summary")));
  result["run"] = req.out;
  return result;
}

void prepare_data(const std::vector<py::object>& inputs, const py::object& out, const py::object& tokenizer,
                  double val_fraction, bool force) {
  io::PrepareOptions o;
  for (const py::object& i : inputs) o.inputs.push_back(path_string(i));
  o.out = path_string(out);
  o.tokenizer = path_string(tokenizer);
  o.val_fraction = val_fraction;
  o.force = force;
  ReleaseGil release;
  try {
    io::prepare_dataset(o);
  } catch (const Error& e) {
    for (const std::string& p : o.inputs)
      if (!std::filesystem::exists(p)) throw MissingPath(e.what());
    throw;
  }
}

}  // namespace

void bind_train(py::module_& m) {
  m.def("_train", &train_run, py::arg("config"), py::arg("data"), py::arg("out"), py::kw_only(),
        py::arg("callback") = py::none(), py::arg("resume") = false, py::arg("init_from") = py::none(),
        py::arg("train_config") = py::none(),
        "The binding behind gatedlm.train (which also takes a config dict); see its docstring.");
  m.def("prepare_data", &prepare_data, py::arg("inputs"), py::arg("out"), py::kw_only(), py::arg("tokenizer") = "byte",
        py::arg("val_fraction") = 0.1, py::arg("force") = false,
        R"(Tokenises text files or directories into a dataset directory for gatedlm.train, as
`gatedlm data prepare --tokenizer T --input ... --out DIR --val-fraction F [--force]`.)");
}

}  // namespace gatedlm::python
