// gatedlm.Model: loading (every model io/model_loader.h loads), init, the
// weights as NumPy views, save, close. Forward, score and analyze: forward.cpp.
#include <optional>

#include "common.h"
#include "hooks.h"
#include "io/checkpoint.h"
#include "io/model_loader.h"
#include "model/init.h"

namespace gatedlm::python {

namespace {

// The one loader of the command line (io/model_loader.h). A quantised model keeps the fp32
// values of its matrices (params() shows them; the products read the blocks).
std::shared_ptr<ModelHandle> load_handle(const std::string& path, const std::optional<std::string>& format,
                                         io::LoadedModel& loaded) {
  io::ModelLoadOptions options;
  options.format = format.value_or("auto");
  options.release_f32 = false;
  loaded = io::load_model(path, options);
  return std::make_shared<ModelHandle>(std::move(loaded));
}

model::ModelConfig config_from(const py::handle& config) {
  if (py::isinstance<py::str>(config) || py::isinstance(config, py::module_::import("os").attr("PathLike"))) {
    const std::string path = path_string(config);
    return naming_missing_path(path, [&] { return model::load_config(path); });
  }
  if (!py::isinstance<py::dict>(config)) throw py::type_error("config: give a dict or the path of a config JSON");
  return model::config_from_json(from_python(config, "config"), "config");
}

// The weights as a dict of NumPy arrays under the checkpoint's names: views into the
// model's buffer (they keep it alive) or copies.
py::dict weight_arrays(const PyModel& self, bool copy) {
  const std::shared_ptr<ModelHandle> h = self.handle();
  const py::capsule owner(new std::shared_ptr<ModelHandle>(h),
                          [](void* p) { delete static_cast<std::shared_ptr<ModelHandle>*>(p); });
  py::dict out;
  float* base = h->model.params().data();
  for (const model::ParamSpec& s : h->model.layout().specs()) {
    py::array_t<float> view(s.shape, base + s.offset, owner);
    out[py::str(s.name)] = copy ? py::array_t<float>(view.attr("copy")()) : view;
  }
  return out;
}

std::shared_ptr<ModelHandle> from_state_dict(const model::ModelConfig& c, const py::dict& state) {
  auto h = std::make_shared<ModelHandle>(c);
  const model::ParamLayout& layout = h->model.layout();
  for (const auto& [key, value] : state) {
    const std::string name = py::str(key);
    if (!layout.find(name)) fail("from_state_dict: tensor ", name, " is not a parameter of this config");
  }
  float* base = h->model.params().data();
  for (const model::ParamSpec& s : layout.specs()) {
    if (!state.contains(s.name)) fail("from_state_dict: tensor ", s.name, " is missing");
    py::array a = py::module_::import("numpy").attr("asarray")(state[py::str(s.name)]);
    if (!a.dtype().is(py::dtype::of<float>()))
      throw py::type_error(cat("from_state_dict: tensor ", s.name, " is ", std::string(py::str(a.dtype())),
                               ", not float32 (convert it first: the weights are taken bit for bit)"));
    const std::vector<int64_t> shape(a.shape(), a.shape() + a.ndim());
    if (shape != s.shape)
      throw py::value_error(cat("from_state_dict: tensor ", s.name, " has shape ",
                                std::string(py::str(py::cast(shape))), ", the config needs ",
                                std::string(py::str(py::cast(s.shape)))));
    const auto c_array = py::array_t<float, py::array::c_style>::ensure(a);
    io::require_finite(c_array.data(), s.numel, cat("from_state_dict: tensor ", s.name));
    std::copy(c_array.data(), c_array.data() + s.numel, base + s.offset);
  }
  return h;
}

}  // namespace

// The constructors: load, init, from_state_dict.
void bind_model_constructors(py::class_<PyModel>& cls);
void bind_model_accessors(py::class_<PyModel>& cls);

void bind_model(py::module_& m) {
  py::class_<PyModel> cls(m, "Model", R"(A gatedlm decoder: the same C++ model the gatedlm command line runs.

Make one with Model.load (a checkpoint, a run directory or a Hugging Face directory),
Model.init (fresh weights) or Model.from_state_dict (NumPy or torch weights). Calls release
the GIL; calls on one model are serialised, two models run in parallel from two threads.
close() (or a with-block) frees the model; views from params() keep its weights alive.)");
  bind_model_constructors(cls);
  bind_model_accessors(cls);
  bind_forward(cls);
  bind_hooks(cls);
  bind_generate(m, cls);
}

void bind_model_constructors(py::class_<PyModel>& cls) {
  cls.def_static(
         "load",
         [](const py::object& path_obj, const py::object& tokenizer, std::optional<std::string> format) {
           const std::string path = path_string(path_obj);
           std::shared_ptr<ModelHandle> h;
           io::LoadedModel loaded;  // its model and blocks move into h; the rest stays
           {
             ReleaseGil release;
             h = naming_missing_path(path, [&] { return load_handle(path, format, loaded); });
           }
           auto out = std::make_unique<PyModel>(h, loaded.checkpoint_dir);
           out->tokenizer = tokenizer.is_none() ? loaded.tokenizer : tokenizer_from(tokenizer);
           return out;
         },
         py::arg("path"), py::arg("tokenizer") = py::none(), py::arg("format") = py::none(),
         R"(Loads any model the command line runs, through the same loader: a checkpoint directory,
a training run directory (its latest checkpoint), a quantised checkpoint (bf16, q8_0, q4_0:
the products run on its blocks; params() shows their dequantised values), a Hugging Face
model directory of any family, or a llama.cpp GGUF file. format: "auto" (None), "gatedlm",
"gguf" or a Hugging Face family name ("paper", "qwen3", "qwen3_next", ...). tokenizer: a
gatedlm.Tokenizer or spec ("byte", .model, tokenizer.json) used by generate() and analyze()
when they are given none; when None, the model's own: a GGUF file's vocabulary, a Hugging
Face directory's tokenizer.json, or the one `gatedlm generate` would find (the run's
dataset, or a tokenizer.model beside it), if any.)")
      .def_static(
          "init",
          [](const py::object& config, uint64_t seed, const py::object& tokenizer) {
            const model::ModelConfig c = config_from(config);
            auto h = std::make_shared<ModelHandle>(c);
            {
              ReleaseGil release;
              std::vector<float> params;
              model::init_params(params, h->model.layout(), c, seed);
              h->model.load_params(params);
            }
            auto out = std::make_unique<PyModel>(h, "");
            if (!tokenizer.is_none()) out->tokenizer = tokenizer_from(tokenizer);
            return out;
          },
          py::arg("config"), py::arg("seed") = 1234, py::arg("tokenizer") = py::none(),
          "Fresh weights for a config (a dict of config.json keys, or its path), as `gatedlm init --seed`.")
      .def_static(
          "from_state_dict",
          [](const py::object& config, const py::dict& state, const py::object& tokenizer) {
            auto out = std::make_unique<PyModel>(from_state_dict(config_from(config), state), "");
            if (!tokenizer.is_none()) out->tokenizer = tokenizer_from(tokenizer);
            return out;
          },
          py::arg("config"), py::arg("state_dict"), py::arg("tokenizer") = py::none(),
          R"(A model from a config and a dict of float32 arrays under the checkpoint's names (every
tensor, no others; torch tensors via .numpy()). The values are copied bit for bit.)");
}

// The weights, the config and the model's life: properties, params / state_dict, save, close.
void bind_model_accessors(py::class_<PyModel>& cls) {
  cls.def_property_readonly(
          "config", [](const PyModel& self) { return to_python(model::config_to_json(self.handle()->model.config())); },
          "The model config as a dict (the keys of config.json).")
      .def_property_readonly(
          "n_params", [](const PyModel& self) { return self.handle()->model.layout().total(); }, "Parameter count.")
      .def_property_readonly("source", &PyModel::source, "The checkpoint directory it was loaded from ('' if none).")
      .def_property(
          "tokenizer", [](const PyModel& self) { return self.tokenizer; },
          [](PyModel& self, const py::object& t) { self.tokenizer = t.is_none() ? nullptr : tokenizer_from(t); },
          "The tokenizer generate() and analyze() use when given none (or None).")
      .def(
          "params", [](const PyModel& self) { return weight_arrays(self, false); },
          R"(The weights as {checkpoint name: float32 array}, zero-copy views into the model's buffer
(writing to them changes the model). torch.from_numpy works on them.)")
      .def(
          "state_dict", [](const PyModel& self, bool copy) { return weight_arrays(self, copy); },
          py::arg("copy") = true,
          "The weights as {checkpoint name: float32 array}: copies by default, views (as params()) with copy=False.")
      .def(
          "save",
          [](const PyModel& self, const py::object& dir_arg) {
            const std::string dir = path_string(dir_arg);
            const std::shared_ptr<ModelHandle> h = self.handle();
            ReleaseGil release;
            const std::lock_guard lock(h->mutex);
            const std::span<const float> p = std::as_const(h->model).params();
            io::save_checkpoint(dir, h->model.config(), std::vector<float>(p.begin(), p.end()));
          },
          py::arg("dir"), "Writes a checkpoint directory (config.json + model.safetensors), as `gatedlm init` does.")
      .def("close", &PyModel::close, "Frees the model; any later call raises ValueError.")
      .def_property_readonly("closed", &PyModel::closed, "Whether close() was called.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PyModel& self, const py::args&) { self.close(); })
      .def("__repr__", [](const PyModel& self) {
        if (self.closed()) return std::string("gatedlm.Model(closed)");
        const model::ModelConfig& c = self.handle()->model.config();
        return cat("gatedlm.Model(", self.handle()->model.layout().total(), " parameters, ", c.n_layers, " layers, d_model ",
                   c.d_model, ", ", model::describe_gate(c), self.source().empty() ? "" : ", from " + self.source(), ")");
      });
}

}  // namespace gatedlm::python
