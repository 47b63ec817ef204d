// Model.generate: an iterator of text pieces over infer::step_generation, the step
// `gatedlm generate` runs (prefill, then decode over the KV cache).
#include <chrono>
#include <span>
#include <type_traits>

#include "common.h"
#include "hooks.h"
#include "infer/decoder.h"
#include "infer/kv_cache.h"
#include "infer/generation.h"
#include "infer/run_generation.h"

namespace gatedlm::python {

namespace {

class PyGeneration {
 public:
  // hooks: null, or the activation hooks every step's forward runs with (hooks.h).
  PyGeneration(std::shared_ptr<ModelHandle> h, std::shared_ptr<io::Tokenizer> tok, std::vector<int32_t> prompt,
               const infer::SamplingParams& sampling, infer::StopRules rules, int64_t requested_tokens,
               std::unique_ptr<PyHooks> hooks, kernels::ElementType kv_type)
      : h_(std::move(h)),
        tok_(std::move(tok)),
        context_bound_(rules.max_tokens < requested_tokens),
        gen_(prompt, sampling, rules, tok_.get()),
        hooks_(std::move(hooks)) {
    const int64_t capacity = static_cast<int64_t>(prompt.size()) + rules.max_tokens;
    if (!hooks_)
      dec_ = std::make_unique<infer::Decoder>(h_->model,
                                              infer::DecoderOptions{.slots = 1, .capacity = capacity, .kv_type = kv_type});
    if (dec_) dec_->reset(0);
  }

  // The next piece of final text (invalid UTF-8 replaced); StopIteration once finished.
  py::str next() {
    std::string text;
    {
      ReleaseGil release;
      const std::lock_guard lock(h_->mutex);
      while (text.empty() && !gen_.finished())
        text = hooks_ ? hooked_step() : infer::step_generation(*dec_, 0, gen_, timing_);
    }
    if (text.empty()) throw py::stop_iteration();
    return utf8_text(text);
  }

  // The fields, copied under the model's lock: next() may be updating them in another thread.
  // "" while running; then length, stop, eos, or context (the model's max_seq_len is full).
  std::string finish_reason() const {
    return locked([this] {
      const bool hit_context = context_bound_ && gen_.finish_reason() == infer::FinishReason::length;
      return hit_context ? std::string("context") : infer::to_string(gen_.finish_reason());
    });
  }
  std::vector<int32_t> ids() const { return locked([this] { return gen_.generated(); }); }
  std::vector<int32_t> prompt_ids() const { return locked([this] { return gen_.prompt(); }); }
  std::string text() const { return locked([this] { return gen_.text(); }); }
  py::dict timing() const {
    const infer::GenerationTiming t = locked([this] { return timing_; });
    py::dict d;
    d["prompt_tokens"] = t.prompt_tokens;
    d["prefill_tokens_per_s"] = t.prefill_tokens_per_s();
    d["decode_tokens_per_s"] = t.decode_tokens_per_s();
    return d;
  }

 private:
  // One step with hooks: the whole forward (training-shaped, under the hooks) over the prompt
  // and the tokens so far, then the sampler on the last row's logits. No KV cache: step t
  // costs a forward of t tokens.
  std::string hooked_step() {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    std::vector<int32_t> ids = gen_.prompt();
    ids.insert(ids.end(), gen_.generated().begin(), gen_.generated().end());
    model::Model<float>& m = h_->model;
    const int64_t n = static_cast<int64_t>(ids.size()), V = m.config().vocab_size;
    const HooksScope scope(*h_, hooks_.get());
    m.forward(ids.data(), nullptr, 1, n);
    std::string text = gen_.accept(std::span<const float>(m.logits() + (n - 1) * V, V));
    const double seconds = std::chrono::duration<double>(clock::now() - start).count();
    if (timing_.prompt_tokens == 0) {
      timing_.prompt_tokens = n;
      timing_.prefill_s = seconds;
    } else {
      timing_.decode_tokens += 1;
      timing_.decode_s += seconds;
    }
    return text;
  }

  // f() under the model's lock, waited for without the GIL (next() holds the lock for a step).
  template <typename F>
  std::invoke_result_t<F> locked(F f) const {
    ReleaseGil release;
    const std::lock_guard lock(h_->mutex);
    return f();
  }

  std::shared_ptr<ModelHandle> h_;
  std::shared_ptr<io::Tokenizer> tok_;
  bool context_bound_;
  infer::Generation gen_;
  std::unique_ptr<PyHooks> hooks_;
  std::unique_ptr<infer::Decoder> dec_;  // null with hooks
  infer::GenerationTiming timing_;
};

std::unique_ptr<PyGeneration> generate(const PyModel& self, const std::string& prompt, int64_t max_tokens,
                                       double temperature, int64_t top_k, double top_p, double min_p,
                                       double repetition_penalty, uint64_t seed, const std::vector<std::string>& stop,
                                       const py::object& tokenizer_arg, const py::object& hooks,
                                       const std::string& kv_type) {
  const kernels::ElementType cache_type = kernels::parse_element_type(kv_type, "kv_type", infer::kKvCacheTypes);
  const std::shared_ptr<ModelHandle> h = self.handle();
  std::shared_ptr<io::Tokenizer> tok = tokenizer_arg.is_none() ? self.tokenizer : tokenizer_from(tokenizer_arg);
  if (!tok) throw py::value_error("generate: give tokenizer=, or load the model with one (Model.load(path, tokenizer=))");
  const model::ModelConfig& c = h->model.config();
  if (tok->vocab_size() > c.vocab_size)
    fail(tok->name(), ": the tokenizer has ", tok->vocab_size(), " ids, more than the model's vocab_size ", c.vocab_size);
  const infer::SamplingParams sampling{temperature, top_k, top_p, min_p, repetition_penalty, seed};
  infer::validate(sampling);
  if (max_tokens < 1) throw py::value_error(cat("generate: max_tokens must be at least 1, got ", max_tokens));
  const std::vector<int32_t> ids = infer::prompt_ids(*tok, prompt);
  infer::StopRules rules{max_tokens, stop, tok->eos_id()};
  rules.max_tokens = infer::fit_to_context(static_cast<int64_t>(ids.size()), max_tokens, 0, c.max_seq_len, "prompt");
  std::unique_ptr<PyHooks> py_hooks = has_hooks(hooks) ? std::make_unique<PyHooks>(c, hooks) : nullptr;
  return std::make_unique<PyGeneration>(h, tok, ids, sampling, rules, max_tokens, std::move(py_hooks), cache_type);
}

}  // namespace

void bind_generate(py::module_& m, py::class_<PyModel>& cls) {
  py::class_<PyGeneration>(m, "Generation",
                           "An iterator of text pieces (final text only: whole UTF-8 characters, stop strings cut). "
                           "After it ends: finish_reason, ids, prompt_ids, text, timing.")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__", &PyGeneration::next)
      .def_property_readonly("finish_reason", &PyGeneration::finish_reason,
                             "'' while running, then 'length', 'stop', 'eos' or 'context' (max_seq_len reached).")
      .def_property_readonly("ids", &PyGeneration::ids, "Generated ids (EOS excluded).")
      .def_property_readonly("prompt_ids", &PyGeneration::prompt_ids, "BOS + the prompt's ids.")
      .def_property_readonly(
          "text", [](const PyGeneration& g) { return utf8_text(g.text()); }, "The final text so far.")
      .def_property_readonly("timing", &PyGeneration::timing, "prompt_tokens, prefill and decode tokens/s.");
  cls.def("generate", &generate, py::arg("prompt"), py::arg("max_tokens") = 128, py::arg("temperature") = 1.0,
          py::arg("top_k") = 0, py::arg("top_p") = 1.0, py::arg("min_p") = 0.0, py::arg("repetition_penalty") = 1.0,
          py::arg("seed") = 0, py::arg("stop") = std::vector<std::string>{}, py::arg("tokenizer") = py::none(),
          py::arg("hooks") = py::none(), py::arg("kv_type") = "f32",
          R"(Continues a prompt as `gatedlm generate` does (BOS + the prompt, prefill, then decode
over a KV cache; the same sampler, seed and stop rules give the same text). Returns a
gatedlm.Generation: iterate it for the text pieces as they become final, e.g.
    for piece in model.generate("Once", max_tokens=50, seed=1): print(piece, end="")
hooks: {name: fn} as in run_with_hooks (steering): each step then runs the whole forward over
the tokens so far under the hooks (no KV cache; hook arrays are [1, tokens so far, ...]).
kv_type: "f32", "f16" or "q8_0", the KV cache's rows (as generate's --kv-type).)");
}

}  // namespace gatedlm::python
