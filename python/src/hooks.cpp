// Model.hook_names, run_with_hooks, run_with_cache and backward: the engine's activation
// hooks (src/model/hooks.h) with Python functions, caches and gradients (hooks.h).
#include "hooks.h"

#include <algorithm>
#include <cstring>

namespace gatedlm::python {

namespace {

int64_t elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

py::array_t<float> copy_of(const float* data, const std::vector<int64_t>& shape) {
  py::array_t<float> out(shape);
  std::memcpy(out.mutable_data(), data, sizeof(float) * elements(shape));
  return out;
}

}  // namespace

PyHooks::PyHooks(const model::ModelConfig& c, const py::object& hooks, const std::vector<std::string>& cache,
                 const std::vector<std::string>& gradients)
    : config_(c) {
  if (!hooks.is_none()) {
    if (!py::isinstance<py::dict>(hooks)) throw py::type_error("hooks: give a dict {hook name: function}");
    for (const auto& [name, fn] : hooks.cast<py::dict>()) {
      if (!py::isinstance<py::str>(name)) throw py::type_error("hooks: the keys are hook names (str)");
      const std::string n = name.cast<std::string>();
      if (!PyCallable_Check(fn.ptr())) throw py::type_error(cat("hooks: the value of \"", n, "\" is not callable"));
      fns_[key(site_of(n, "hooks"))] = py::reinterpret_borrow<py::object>(fn);
    }
  }
  for (const std::string& n : cache) cache_sites_.insert(key(site_of(n, "names")));
  for (const std::string& n : gradients) {
    const model::HookSite s = site_of(n, "names");
    if (!model::hook_has_gradient(s.point))
      throw py::value_error(cat("names: backward reports no gradient at \"", n,
                                "\" (it does at the residual stream, hook_attn_out, hook_mlp_out, attn.hook_q, "
                                "hook_k, hook_v, hook_z and hook_logits)"));
    grad_sites_.insert(key(s));
  }
}

model::HookSite PyHooks::site_of(const std::string& name, const char* what) const {
  const std::optional<model::HookSite> s = model::parse_hook_name(name, config_);
  if (!s)
    throw py::value_error(cat(what, ": this model has no hook point \"", name, "\" (model.hook_names() lists them, e.g. ",
                              model::hook_name(model::hook_sites(config_).front()), ")"));
  return *s;
}

bool PyHooks::wants(const model::HookSite& site) const {
  return fns_.count(key(site)) || cache_sites_.count(key(site));
}

// The hook sees a copy (a NumPy array it may keep); what it changes in place, or returns,
// is copied back into the forward's tensor.
void PyHooks::forward(const model::HookSite& site, const model::HookTensor<float>& t) {
  AcquireGil gil;
  const std::string name = model::hook_name(site);
  py::array_t<float> values = copy_of(t.data, t.shape);
  if (const auto fn = fns_.find(key(site)); fn != fns_.end()) {
    const py::object result = fn->second(values, name);
    if (!result.is_none()) {
      auto replaced = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(result);
      if (!replaced) throw py::type_error(cat("hook ", name, ": returned neither None nor an array"));
      const std::vector<int64_t> shape(replaced.shape(), replaced.shape() + replaced.ndim());
      if (shape != t.shape)
        throw py::value_error(cat("hook ", name, ": returned an array of another shape than the one it was given"));
      values = replaced;
    }
    std::memcpy(t.data, values.data(), sizeof(float) * t.size());
  }
  if (cache_sites_.count(key(site))) cache_[py::str(name)] = copy_of(t.data, t.shape);
}

bool PyHooks::wants_gradient(const model::HookSite& site) const { return grad_sites_.count(key(site)) > 0; }

void PyHooks::gradient(const model::HookSite& site, const model::HookTensor<const float>& t) {
  AcquireGil gil;
  grads_[py::str(model::hook_name(site))] = copy_of(t.data, t.shape);
}

namespace {

// Checked ids of a hooked pass (at most max_seq_len per sequence).
TokenBatch hooked_ids(const model::ModelConfig& c, const py::handle& ids, const char* what) {
  TokenBatch b = token_batch(ids, c.vocab_size, what);
  if (b.seq > c.max_seq_len)
    throw py::value_error(cat(what, ": ", b.seq, " tokens per sequence exceed the model's max_seq_len ", c.max_seq_len));
  return b;
}

// The forward under the hooks; returns the logits ([seq, vocab] for 1-D ids) and the mean loss.
std::pair<py::array_t<float>, double> hooked_forward(ModelHandle& h, const TokenBatch& b, PyHooks& hooks,
                                                     const std::vector<int32_t>& targets) {
  model::Model<float>& m = h.model;
  const int64_t V = m.config().vocab_size;
  std::vector<int64_t> shape{b.batch, b.seq, V};
  if (!b.two_dims) shape.erase(shape.begin());
  py::array_t<float> logits(shape);
  double loss = 0;
  {
    ReleaseGil release;
    const std::lock_guard lock(h.mutex);
    const HooksScope scope(h, &hooks);
    loss = m.forward(b.ids.data(), targets.empty() ? nullptr : targets.data(), b.batch, b.seq);
    std::memcpy(logits.mutable_data(), m.logits(), sizeof(float) * b.batch * b.seq * V);
  }
  return {logits, loss};
}

py::array_t<float> run_with_hooks(const PyModel& self, const py::handle& ids, const py::object& hooks) {
  const std::shared_ptr<ModelHandle> h = self.handle();
  const TokenBatch b = hooked_ids(h->model.config(), ids, "Model.run_with_hooks");
  PyHooks py_hooks(h->model.config(), hooks);
  return hooked_forward(*h, b, py_hooks, {}).first;
}

py::tuple run_with_cache(const PyModel& self, const py::handle& ids, const py::object& names, const py::object& hooks) {
  const std::shared_ptr<ModelHandle> h = self.handle();
  const model::ModelConfig& c = h->model.config();
  const TokenBatch b = hooked_ids(c, ids, "Model.run_with_cache");
  std::vector<std::string> wanted;
  if (names.is_none())
    for (const model::HookSite& s : model::hook_sites(c)) wanted.push_back(model::hook_name(s));
  else
    wanted = names.cast<std::vector<std::string>>();
  PyHooks py_hooks(c, hooks, wanted);
  py::array_t<float> logits = hooked_forward(*h, b, py_hooks, {}).first;
  return py::make_tuple(logits, py_hooks.cached());
}

// Next-token targets of each sequence (the last token has none: -1), or the caller's.
std::vector<int32_t> loss_targets(const TokenBatch& b, const py::object& targets, int64_t vocab) {
  if (!targets.is_none()) {
    const TokenBatch t = token_batch(targets, vocab, "Model.backward targets");
    if (t.batch != b.batch || t.seq != b.seq)
      throw py::value_error("Model.backward: targets must have the shape of ids");
    return t.ids;
  }
  std::vector<int32_t> out(b.ids.size(), -1);
  for (int64_t r = 0; r < b.batch; ++r)
    for (int64_t t = 0; t + 1 < b.seq; ++t) out[r * b.seq + t] = b.ids[r * b.seq + t + 1];
  return out;
}

// d (chosen logit) / d logits: one 1 at (batch row, position, token).
std::vector<float> logit_seed(const TokenBatch& b, const py::object& logit, int64_t vocab) {
  const auto at = logit.cast<std::vector<int64_t>>();
  if (at.size() != (b.two_dims ? 3u : 2u))
    throw py::value_error(b.two_dims ? "Model.backward: logit=(batch row, position, token) for 2-D ids"
                                     : "Model.backward: logit=(position, token) for 1-D ids");
  const int64_t row = b.two_dims ? at[0] : 0, pos = at[at.size() - 2], token = at.back();
  if (row < 0 || row >= b.batch || pos < 0 || pos >= b.seq || token < 0 || token >= vocab)
    throw py::value_error(cat("Model.backward: logit (", row, ", ", pos, ", ", token, ") is outside the ", b.batch,
                              " x ", b.seq, " x ", vocab, " logits"));
  std::vector<float> seed(static_cast<size_t>(b.batch * b.seq * vocab), 0.0f);
  seed[(row * b.seq + pos) * vocab + token] = 1.0f;
  return seed;
}

// The parameters' gradients {checkpoint name: float32 array} (copies).
py::dict param_gradients(model::Model<float>& m) {
  py::dict out;
  const std::span<float> g = m.grads();
  for (const model::ParamSpec& s : m.layout().specs()) out[py::str(s.name)] = copy_of(g.data() + s.offset, s.shape);
  return out;
}

py::dict backward(const PyModel& self, const py::handle& ids, const py::object& targets, const py::object& logit,
                  const std::vector<std::string>& names, const py::object& hooks, bool params) {
  const std::shared_ptr<ModelHandle> h = self.handle();
  model::Model<float>& m = h->model;
  const model::ModelConfig& c = m.config();
  const TokenBatch b = hooked_ids(c, ids, "Model.backward");
  if (!logit.is_none() && !targets.is_none()) throw py::value_error("Model.backward: give targets= or logit=, not both");
  const std::vector<int32_t> tgt = logit.is_none() ? loss_targets(b, targets, c.vocab_size) : std::vector<int32_t>{};
  const std::vector<float> seed = logit.is_none() ? std::vector<float>{} : logit_seed(b, logit, c.vocab_size);
  PyHooks py_hooks(c, hooks, {}, names);
  py::array_t<float> logits;
  double value = 0;
  {
    ReleaseGil release;
    const std::lock_guard lock(h->mutex);
    const HooksScope scope(*h, &py_hooks);
    value = m.forward(b.ids.data(), tgt.empty() ? nullptr : tgt.data(), b.batch, b.seq);
    m.zero_grads();
    if (seed.empty()) {
      m.backward();
    } else {
      const auto max = std::max_element(seed.begin(), seed.end()) - seed.begin();
      value = m.logits()[max];
      m.backward_from_logits(seed);
    }
  }
  py::dict out;
  out[logit.is_none() ? "loss" : "logit"] = value;
  out["grads"] = py_hooks.gradients();
  if (params) out["param_grads"] = param_gradients(m);
  return out;
}

}  // namespace

void bind_hooks(py::class_<PyModel>& cls) {
  cls.def(
         "hook_names",
         [](const PyModel& self) {
           std::vector<std::string> out;
           for (const model::HookSite& s : model::hook_sites(self.handle()->model.config()))
             out.push_back(model::hook_name(s));
           return out;
         },
         "Every hook point of this model, in the order the forward reaches them (docs/python.md lists their shapes).")
      .def("run_with_hooks", &run_with_hooks, py::arg("ids"), py::arg("hooks"),
           R"(The forward with hooks: {name: fn}, fn(array, name) called at that point with a copy of
the tensor (float32, leading axes [batch, seq], or [batch, heads, seq, seq] for hook_pattern).
It may change the array in place or return a replacement of the same shape; the forward goes
on with it. Returns the logits (as forward's "logits").)")
      .def("run_with_cache", &run_with_cache, py::arg("ids"), py::arg("names") = py::none(), py::arg("hooks") = py::none(),
           R"(The forward, keeping a copy of the tensor at each hook point in `names` (None: every
point; after the hook of the same name, if any). Returns (logits, {name: array}).)")
      .def("backward", &backward, py::arg("ids"), py::kw_only(), py::arg("targets") = py::none(),
           py::arg("logit") = py::none(), py::arg("names") = std::vector<std::string>{}, py::arg("hooks") = py::none(),
           py::arg("params") = false,
           R"(The engine's backward: the gradient of the mean next-token loss (targets: ids shifted by
one, or an int array of ids' shape, -1 = not counted), or of one logit (logit=(position, token),
or (batch row, position, token) for 2-D ids), with respect to the activations at the hook
points in `names` and, with params=True, to every parameter. `hooks` change the forward as in
run_with_hooks (the gradient passes through a hook as if it were the identity).
Returns {"loss" or "logit": value, "grads": {name: array}, "param_grads": {name: array}}.)");
}

}  // namespace gatedlm::python
