#pragma once
// What the binding files of the Python package share: JSON <-> Python conversion, token
// ids from Python (checked: integers, in the vocabulary, the right shape), the model handle
// and the exceptions. The package holds no logic of its own: every computation is a call
// into the rooms of src/ that the gatedlm binary uses.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "gil.h"
#include "io/model_loader.h"
#include "io/tokenizer.h"
#include "model/model.h"
#include "model/quantized_weights.h"

namespace gatedlm::python {

namespace py = pybind11;

// A path that does not exist, behind a gatedlm::Error: raised as gatedlm.PathNotFoundError
// (a gatedlm.Error and a FileNotFoundError) with the library's message.
struct MissingPath : Error {
  using Error::Error;
};

// Runs f(); a gatedlm::Error raised while `path` does not exist becomes MissingPath.
template <typename F>
auto naming_missing_path(const std::string& path, F&& f) -> decltype(f());

// A str or os.PathLike as a path string (os.fspath).
std::string path_string(const py::handle& p);

// Bytes as str, invalid UTF-8 replaced by U+FFFD (a byte tokenizer can emit any byte).
py::str utf8_text(const std::string& bytes);

// JSON through Python's json module: exact for every double (17 significant digits).
py::object to_python(const nlohmann::json& j);
nlohmann::json from_python(const py::handle& obj, const std::string& what);

// Token ids given from Python: a list (of lists) of ints or an integer NumPy array, 1-D
// [seq] or 2-D [batch, seq] (equal lengths). Raises TypeError for non-integers, ValueError
// for wrong shapes, non-contiguous arrays and ids outside 0..vocab-1.
struct TokenBatch {
  std::vector<int32_t> ids;  // [batch, seq] row-major
  int64_t batch = 0, seq = 0;
  bool two_dims = false;  // given as [batch, seq] (outputs keep the batch axis)
};
TokenBatch token_batch(const py::handle& ids, int64_t vocab, const char* what);
// Sequences of possibly different lengths (a 2-D array, or a list of 1-D sequences).
std::vector<std::vector<int32_t>> token_sequences(const py::handle& ids, int64_t vocab, const char* what);

// The C++ model and the lock that serialises calls on it (forward and decoding use the
// model's activation buffers). Shared with NumPy views of its weights and with generators,
// so it outlives Model.close() while they exist.
// A quantised model keeps its weight blocks beside it, declared after the model's owner so
// that they are destroyed (and detached from its buffer) first.
struct ModelHandle {
  explicit ModelHandle(const model::ModelConfig& c)
      : owned(std::make_unique<model::Model<float>>(c)), model(*owned) {}
  explicit ModelHandle(io::LoadedModel&& loaded)
      : owned(std::move(loaded.model)), quantized(std::move(loaded.quantized)), model(*owned) {}
  std::unique_ptr<model::Model<float>> owned;
  std::unique_ptr<model::QuantizedWeights> quantized;  // null for F32 weights
  model::Model<float>& model;
  std::mutex mutex;
  // The thread running a hooked pass of this model (hooks.h's HooksScope), or none.
  std::atomic<std::thread::id> hooked_thread{};
};

// The Python Model object's state.
class PyModel {
 public:
  PyModel(std::shared_ptr<ModelHandle> h, std::string source) : handle_(std::move(h)), source_(std::move(source)) {}
  // The handle; raises ValueError after close().
  std::shared_ptr<ModelHandle> handle() const;
  const std::string& source() const { return source_; }
  void close() { handle_.reset(); }
  bool closed() const { return !handle_; }
  std::shared_ptr<io::Tokenizer> tokenizer;  // attached by Model.load(..., tokenizer=...) or None

 private:
  std::shared_ptr<ModelHandle> handle_;
  std::string source_;  // the checkpoint directory, or "" for Model.init / from_state_dict
};

// A tokenizer given as a gatedlm.Tokenizer or a spec string ("byte", a .model, a tokenizer.json).
std::shared_ptr<io::Tokenizer> tokenizer_from(const py::handle& obj);

void bind_errors(py::module_& m);
void bind_tokenizer(py::module_& m);
void bind_model(py::module_& m);
void bind_forward(py::class_<PyModel>& cls);
void bind_generate(py::module_& m, py::class_<PyModel>& cls);
void bind_train(py::module_& m);

template <typename F>
auto naming_missing_path(const std::string& path, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const MissingPath&) {
    throw;
  } catch (const Error& e) {
    std::error_code ec;
    if (!path.empty() && !std::filesystem::exists(path, ec)) throw MissingPath(e.what());
    throw;
  }
}

}  // namespace gatedlm::python
