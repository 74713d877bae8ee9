// python/src/errors.hpp — dlm's typed C++ errors (dlm/core/error.hpp, dlm/core/memory.hpp) as the Python
// exception classes of dlm/errors.py, carrying what the C++ error names: InvalidParameter.parameter
// and .rule, FileError.path, TensorError.tensor, NumericError.sequence/.forward/.row,
// MemoryError_.needed/.available.
#pragma once

#include <exception>

#include <nanobind/nanobind.h>

#include <dlm/core/error.hpp>
#include <dlm/core/memory.hpp>

namespace dlm::python {

namespace nb = nanobind;

/// Sets the Python error to dlm.errors.<cls>(*args).
template <class... Args>
void raise_as(const char* cls, const Args&... args) {
    nb::object type = nb::module_::import_("dlm.errors").attr(cls);
    nb::object value = type(args...);
    PyErr_SetObject(type.ptr(), value.ptr());
}

inline void translate_error(const std::exception_ptr& p, void*) {
    try {
        std::rethrow_exception(p);
    } catch (const invalid_parameter& e) {
        raise_as("InvalidParameter", e.what(), e.parameter(), e.rule());
    } catch (const tensor_error& e) {
        raise_as("TensorError", e.what(), e.path(), e.tensor());
    } catch (const file_error& e) {
        raise_as("FileError", e.what(), e.path());
    } catch (const numeric_error& e) {
        raise_as("NumericError", e.what(), e.sequence(), e.forward(), e.row());
    } catch (const memory_error& e) {
        raise_as("OutOfMemory", e.what(), e.needed(), e.available());
    } catch (const contract_error& e) {
        raise_as("ContractError", e.what());
    } catch (const error& e) {
        raise_as("Error", e.what());
    }
}

}  // namespace dlm::python
