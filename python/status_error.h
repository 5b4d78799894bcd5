// Copyright dreplay authors.
//
// status_error.h: absl::Status to Python exceptions, for the `_dreplay`
// extension.
//
// A failed status becomes `dreplay.Error` (a RuntimeError): str(e) is the
// status's own text ("INVALID_ARGUMENT: --link=x: ..."), e.code its code's
// name ("INVALID_ARGUMENT") and e.message its message, so a Python caller
// reads exactly what the C++ libraries say. InvalidArgument and OutOfRange
// also derive from ValueError, DeadlineExceeded from TimeoutError, so the
// usual `except ValueError` and `except TimeoutError` work.
//
//   ThrowIfError(writer->Flush());
//   auto value = ValueOrThrow(reader->Next(timeout));
//
// Thread safety: the Throw functions may run without the GIL (they throw a
// C++ exception; pybind11 translates it once the GIL is held again).

#ifndef DREPLAY_PYTHON_STATUS_ERROR_H_
#define DREPLAY_PYTHON_STATUS_ERROR_H_

#include <stdexcept>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pybind11/pybind11.h"

namespace dreplay::python {

// A failed status on its way to Python.
class StatusError : public std::runtime_error {
 public:
  explicit StatusError(absl::Status status)
      : std::runtime_error(status.ToString()), status_(std::move(status)) {}
  const absl::Status& status() const { return status_; }

 private:
  absl::Status status_;
};

// Defines dreplay's exception classes in `m` (Error, and the subclasses
// named above) and registers the translator of StatusError.
void RegisterStatusErrors(pybind11::module_& m);

// Throws StatusError unless `status` is OK.
inline void ThrowIfError(const absl::Status& status) {
  if (!status.ok()) throw StatusError(status);
}

template <typename T>
T ValueOrThrow(absl::StatusOr<T> value) {
  ThrowIfError(value.status());
  return *std::move(value);
}

}  // namespace dreplay::python

#endif  // DREPLAY_PYTHON_STATUS_ERROR_H_
