#pragma once
// The Python side of the engine's activation hooks (src/model/hooks.h): Python functions
// called at named points of the forward, the activations they cache, and the gradients the
// backward reports at named points. Used by Model.run_with_hooks / run_with_cache / backward
// (hooks.cpp), score (forward.cpp) and generate (generate.cpp).
#include <map>
#include <set>
#include <string>
#include <utility>

#include "common.h"
#include "model/hooks.h"

namespace gatedlm::python {

class PyHooks final : public model::ActivationHooks<float> {
 public:
  // hooks: None or {name: fn(array, name) -> None or a replacement array}; cache: names whose
  // tensors are copied out (after their hook); gradients: names whose gradients backward
  // reports. Raises ValueError naming a name the model does not have. Built with the GIL.
  PyHooks(const model::ModelConfig& c, const py::object& hooks, const std::vector<std::string>& cache = {},
          const std::vector<std::string>& gradients = {});
  bool empty() const { return fns_.empty() && cache_sites_.empty() && grad_sites_.empty(); }

  bool wants(const model::HookSite& site) const override;
  void forward(const model::HookSite& site, const model::HookTensor<float>& t) override;
  bool wants_gradient(const model::HookSite& site) const override;
  void gradient(const model::HookSite& site, const model::HookTensor<const float>& t) override;

  py::dict cached() const { return cache_; }      // {name: float32 array}, with the GIL
  py::dict gradients() const { return grads_; }  // {name: float32 array}, with the GIL

 private:
  using Key = std::pair<int64_t, int>;
  static Key key(const model::HookSite& s) { return {s.layer, static_cast<int>(s.point)}; }
  model::HookSite site_of(const std::string& name, const char* what) const;

  const model::ModelConfig& config_;
  std::map<Key, py::object> fns_;
  std::set<Key> cache_sites_, grad_sites_;
  py::dict cache_, grads_;
};

// Sets hooks on the model for the life of the scope (none when hooks is null or empty), and
// marks this thread as running them (PyModel::handle refuses calls from inside a hook).
class HooksScope {
 public:
  HooksScope(ModelHandle& h, PyHooks* hooks) : h_(h), on_(hooks && !hooks->empty()) {
    if (!on_) return;
    h_.model.set_hooks(hooks);
    h_.hooked_thread = std::this_thread::get_id();
  }
  ~HooksScope() {
    if (!on_) return;
    h_.model.set_hooks(nullptr);
    h_.hooked_thread = std::thread::id{};
  }
  HooksScope(const HooksScope&) = delete;
  HooksScope& operator=(const HooksScope&) = delete;

 private:
  ModelHandle& h_;
  bool on_;
};

// Whether a Python hooks argument (None or a dict) names any hook.
inline bool has_hooks(const py::object& hooks) { return !hooks.is_none() && py::len(hooks) > 0; }

void bind_hooks(py::class_<PyModel>& cls);

}  // namespace gatedlm::python
