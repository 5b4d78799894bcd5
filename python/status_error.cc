// Copyright dreplay authors.

#include "python/status_error.h"

#include <string>

#include "absl/status/status.h"

namespace dreplay::python {
namespace py = pybind11;

void RegisterStatusErrors(py::module_& m) {
  // Kept alive by the module, which holds references to them.
  py::object error = py::reinterpret_steal<py::object>(PyErr_NewExceptionWithDoc(
      "dreplay._dreplay.Error",
      "A dreplay call failed: str(e) is the C++ status, e.code its code's name, "
      "e.message its message.",
      PyExc_RuntimeError, nullptr));
  m.attr("Error") = error;
  auto subclass = [&](const char* name, PyObject* also) {
    py::tuple bases = py::make_tuple(error, py::handle(also));
    py::object cls = py::reinterpret_steal<py::object>(PyErr_NewException(
        (std::string("dreplay._dreplay.") + name).c_str(), bases.ptr(), nullptr));
    m.attr(name) = cls;
  };
  subclass("InvalidArgumentError", PyExc_ValueError);
  subclass("DeadlineExceededError", PyExc_TimeoutError);

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      py::module_ module = py::module_::import("dreplay._dreplay");
      const char* name = "Error";
      switch (e.status().code()) {
        case absl::StatusCode::kInvalidArgument:
        case absl::StatusCode::kOutOfRange:
          name = "InvalidArgumentError";
          break;
        case absl::StatusCode::kDeadlineExceeded:
          name = "DeadlineExceededError";
          break;
        default:
          break;
      }
      py::object cls = module.attr(name);
      py::object instance = cls(e.what());
      instance.attr("code") = absl::StatusCodeToString(e.status().code());
      instance.attr("message") = std::string(e.status().message());
      PyErr_SetObject(cls.ptr(), instance.ptr());
    }
  });
}

}  // namespace dreplay::python
