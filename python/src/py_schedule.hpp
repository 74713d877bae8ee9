// python/src/py_schedule.hpp — an unmasking schedule whose select() is a Python callable, so a new
// unmasking rule can be prototyped without writing C++ (docs/python.md, "A schedule in Python").
//
// The callable gets a dlm.ScheduleStep (the step's candidates as numpy arrays, and where the sequence
// stands) and returns the indices of the candidates to commit. It runs with the GIL held; the engine's
// step runs without it and takes it back only for this call. An exception the callable raises fails
// its own sequence (dlm::contract_error, as a C++ policy breaking its contract would) and is raised
// again, unchanged, by the step that ran it.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <dlm/core/error.hpp>
#include <dlm/schedule/concept.hpp>

namespace dlm::python {

namespace nb = nanobind;

/// What a Python schedule sees at one step (bound as dlm.ScheduleStep); arrays are copies.
struct schedule_step {
    std::vector<index_t> position;
    std::vector<token_id> token;
    std::vector<float> probability, margin, neg_entropy;
    index_t forward = 0, block = 0, step_in_block = 0, block_begin = 0, block_end = 0, masked_at_block_start = 0, committed = 0;
    std::uint64_t seed = 0;
};

/// The callable and the first exception it raised (kept until the step that ran it re-raises it).
/// Held through a shared_ptr: copies of the schedule (one per sequence) never touch Python refcounts
/// outside the GIL; the last owner releases the callable with the GIL held.
class py_callable {
public:
    explicit py_callable(nb::object fn) : fn_(std::move(fn)) {}
    py_callable(const py_callable&) = delete;
    py_callable& operator=(const py_callable&) = delete;
    ~py_callable() {
        nb::gil_scoped_acquire gil;
        fn_.reset();
        raised_.reset();
    }

    /// Calls the function (the GIL taken) and appends the indices it returns to `chosen`.
    void select(const step_context& ctx, std::span<const candidate> c, std::vector<index_t>& chosen) {
        nb::gil_scoped_acquire gil;
        if (!fn_.is_valid()) throw contract_error("dlm: the Python schedule was released by Python's garbage collector (clear)");
        try {
            nb::object picked = fn_(step_of(ctx, c));
            // At most one index per candidate is read: an endless iterable fails the sequence rather
            // than growing without bound. A bool is no index (True would pass for 1).
            std::size_t read = 0;
            for (nb::handle h : picked) {
                if (++read > c.size())
                    throw contract_error("dlm: the Python schedule returned more indices than the " + std::to_string(c.size()) + " candidates");
                if (PyBool_Check(h.ptr())) throw nb::cast_error();
                chosen.push_back(nb::cast<index_t>(h));
            }
        } catch (nb::python_error& e) {
            if (!raised_.is_valid()) {
                e.restore();
                raised_ = fetch_raised();
            }
            throw contract_error("dlm: the Python schedule raised an exception (raised again by the step)");
        } catch (const nb::cast_error&) {
            throw contract_error("dlm: the Python schedule must return an iterable of candidate indices (int)");
        }
    }

    /// The Python objects held (the callable, a pending exception) for Python's cycle collector
    /// (tp_traverse of the engine that holds this): a schedule that refers back to the object holding
    /// its engine makes a cycle the collector can then see and free.
    int traverse(visitproc visit, void* arg) const {
        Py_VISIT(fn_.ptr());
        Py_VISIT(raised_.ptr());
        return 0;
    }
    /// Drops them (tp_clear: the collector breaks a cycle through this); a later select fails its sequence.
    void clear() {
        fn_.reset();
        raised_.reset();
    }

    /// Raises the exception the callable raised since the last call, if any (with the GIL held).
    void reraise_pending() {
        if (!raised_.is_valid()) return;
        nb::object e = std::move(raised_);
        PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(e.ptr())), e.ptr());
        throw nb::python_error();
    }

private:
    static nb::object fetch_raised() {
        PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        if (tb) PyException_SetTraceback(value, tb);
        Py_XDECREF(type);
        Py_XDECREF(tb);
        return nb::steal(value);
    }

    static schedule_step step_of(const step_context& ctx, std::span<const candidate> c) {
        schedule_step s;
        for (const candidate& x : c) {
            s.position.push_back(x.position);
            s.token.push_back(x.token);
            s.probability.push_back(x.probability);
            s.margin.push_back(x.margin);
            s.neg_entropy.push_back(x.neg_entropy);
        }
        s.forward = ctx.forward;
        s.block = ctx.cursor.block;
        s.step_in_block = ctx.cursor.step_in_block;
        s.block_begin = ctx.layout.block_begin(ctx.cursor.block);
        s.block_end = ctx.layout.block_end(ctx.cursor.block);
        s.masked_at_block_start = ctx.masked_at_block_start;
        s.committed = ctx.committed_in_generation;
        s.seed = ctx.seed;
        return s;
    }

    nb::object fn_;
    nb::object raised_;
};

/// The schedule policy: a Python callable's select, and (stop_at_eos) CDLM's early stop after a block
/// holding EOS.
struct py_schedule {
    std::shared_ptr<py_callable> fn;
    bool stop_at_eos = true;

    void select(const step_context& ctx, std::span<const candidate> c, std::vector<index_t>& chosen) const {
        if (!c.empty()) fn->select(ctx, c, chosen);
    }
    [[nodiscard]] bool stop_after_block(const step_context& ctx, std::span<const token_id> block) const noexcept {
        return stop_at_eos && detail::contains_eos(block, ctx.eos_ids);
    }
};

static_assert(unmask_schedule<py_schedule>);

}  // namespace dlm::python
