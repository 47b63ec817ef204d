// gatedlm.Error (every error the library reports, with its message) and
// gatedlm.PathNotFoundError (also a FileNotFoundError: a path given does not exist).
#include "common.h"

namespace gatedlm::python {

void bind_errors(py::module_& m) {
  static py::exception<Error> error(m, "Error", PyExc_RuntimeError);
  error.attr("__module__") = "gatedlm";
  error.doc() =
      "An error the gatedlm library reports: the same message as the gatedlm command line, naming the file, key, "
      "flag or value at fault.";
  const py::tuple bases = py::make_tuple(error, py::handle(PyExc_FileNotFoundError));
  static PyObject* missing = PyErr_NewExceptionWithDoc(
      "gatedlm.PathNotFoundError", "A path given to gatedlm does not exist (a gatedlm.Error and a FileNotFoundError).",
      bases.ptr(), nullptr);
  m.add_object("PathNotFoundError", py::handle(missing));
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const MissingPath& e) {
      PyErr_SetString(missing, e.what());
    } catch (const Error& e) {
      error(e.what());
    }
  });
}

}  // namespace gatedlm::python
