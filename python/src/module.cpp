// The extension module gatedlm._gatedlm; python/gatedlm/__init__.py re-exports it.
#include "common.h"

PYBIND11_MODULE(_gatedlm, m) {
  namespace py = pybind11;
  using namespace gatedlm::python;
  m.doc() = "gatedlm's C++ engine (the rooms of src/ the gatedlm binary uses), bound with pybind11.";
  bind_errors(m);
  bind_tokenizer(m);
  bind_model(m);
  bind_train(m);
  bind_gil_exit(m);
}
