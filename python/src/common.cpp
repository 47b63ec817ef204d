#include "common.h"

#include <thread>

namespace gatedlm::python {

std::string path_string(const py::handle& p) { return py::str(py::module_::import("os").attr("fspath")(p)); }

py::str utf8_text(const std::string& bytes) {
  return py::reinterpret_steal<py::str>(
      PyUnicode_DecodeUTF8(bytes.data(), static_cast<Py_ssize_t>(bytes.size()), "replace"));
}

py::object to_python(const nlohmann::json& j) {
  return py::module_::import("json").attr("loads")(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

nlohmann::json from_python(const py::handle& obj, const std::string& what) {
  const std::string text = py::str(py::module_::import("json").attr("dumps")(obj, py::arg("allow_nan") = false));
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw py::value_error(cat(what, ": not valid JSON: ", e.what()));
  }
}

namespace {

// ids as a NumPy array of int64 with the checks every entry point shares.
py::array_t<int64_t> integer_array(const py::handle& ids, const char* what) {
  py::array arr;
  if (py::isinstance<py::array>(ids)) {
    arr = py::reinterpret_borrow<py::array>(ids);
    if (!(arr.flags() & py::array::c_style))
      throw py::value_error(cat(what, ": the array is not C-contiguous; pass numpy.ascontiguousarray(ids)"));
  } else {
    arr = py::module_::import("numpy").attr("asarray")(ids);
  }
  if (arr.size() == 0) throw py::value_error(cat(what, ": no token ids"));
  const char kind = arr.dtype().kind();
  if (kind != 'i' && kind != 'u')
    throw py::type_error(cat(what, ": token ids must be integers, got an array of ",
                             std::string(py::str(arr.dtype()))));
  return py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(arr);
}

void check_range(const int64_t* v, int64_t n, int64_t vocab, const char* what) {
  for (int64_t i = 0; i < n; ++i)
    if (v[i] < 0 || v[i] >= vocab)
      throw py::value_error(cat(what, ": token id ", v[i], " at index ", i, " is outside the vocabulary 0..", vocab - 1));
}

}  // namespace

TokenBatch token_batch(const py::handle& ids, int64_t vocab, const char* what) {
  const py::array_t<int64_t> arr = integer_array(ids, what);
  if (arr.ndim() != 1 && arr.ndim() != 2)
    throw py::value_error(cat(what, ": token ids must be 1-D [seq] or 2-D [batch, seq], got ", arr.ndim(), " dims"));
  TokenBatch b;
  b.two_dims = arr.ndim() == 2;
  b.batch = b.two_dims ? arr.shape(0) : 1;
  b.seq = arr.shape(arr.ndim() - 1);
  if (b.batch < 1 || b.seq < 1) throw py::value_error(cat(what, ": no token ids"));
  check_range(arr.data(), arr.size(), vocab, what);
  b.ids.assign(arr.data(), arr.data() + arr.size());
  return b;
}

std::vector<std::vector<int32_t>> token_sequences(const py::handle& ids, int64_t vocab, const char* what) {
  std::vector<std::vector<int32_t>> out;
  const bool ragged = py::isinstance<py::list>(ids) || py::isinstance<py::tuple>(ids);
  if (ragged && py::len(ids) > 0 && !py::isinstance<py::int_>(py::reinterpret_borrow<py::sequence>(ids)[0])) {
    for (const py::handle& row : ids) {
      const TokenBatch b = token_batch(row, vocab, what);
      if (b.two_dims) throw py::value_error(cat(what, ": a list of sequences holds 1-D sequences"));
      out.push_back(b.ids);
    }
    return out;
  }
  const TokenBatch b = token_batch(ids, vocab, what);
  for (int64_t r = 0; r < b.batch; ++r) out.emplace_back(b.ids.begin() + r * b.seq, b.ids.begin() + (r + 1) * b.seq);
  return out;
}

std::shared_ptr<io::Tokenizer> tokenizer_from(const py::handle& obj) {
  if (py::isinstance<py::str>(obj)) {
    const std::string spec = py::str(obj);
    return naming_missing_path(spec == "byte" ? "" : spec, [&] { return std::shared_ptr(io::Tokenizer::load(spec)); });
  }
  try {
    return obj.cast<std::shared_ptr<io::Tokenizer>>();
  } catch (const py::cast_error&) {
    throw py::type_error("tokenizer: give a gatedlm.Tokenizer or a spec string (\"byte\", a .model, a tokenizer.json)");
  }
}

std::shared_ptr<ModelHandle> PyModel::handle() const {
  if (!handle_) throw py::value_error("gatedlm.Model: the model was closed (close() or a with-block ended)");
  // A hook runs while its forward holds the model's lock: calling the model from it would wait forever.
  if (handle_->hooked_thread.load() == std::this_thread::get_id())
    throw py::value_error("gatedlm.Model: a hook cannot call its own model (its forward is running); use another "
                          "Model, or keep what the hook needs and call after the forward");
  return handle_;
}

}  // namespace gatedlm::python
