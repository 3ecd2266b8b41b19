// conflux_torch._C: the Python face of ProcessGroupConflux. torch's own bindings of c10d::Backend and
// Store must exist first (import torch before this module); conflux_torch/__init__.py does.
#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/extension.h>

#include "conflux/conflux.h"
#include "conflux_backend.h"

namespace py = pybind11;
using conflux_torch::ProcessGroupConflux;

PYBIND11_MODULE(_C, m) {
  m.doc() = "Conflux collectives as a torch.distributed backend (the extension behind conflux_torch)";
  py::module_::import("torch.distributed");
  py::class_<ProcessGroupConflux, c10d::Backend, c10::intrusive_ptr<ProcessGroupConflux>>(m, "ProcessGroupConflux")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout, const std::string& groupName,
                       const std::vector<uint64_t>& globalRanks) {
             return c10::make_intrusive<ProcessGroupConflux>(store, rank, size, timeout, groupName, globalRanks);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"), py::arg("group_name") = "",
           py::arg("global_ranks") = std::vector<uint64_t>{},
           // Joining blocks until every rank arrived: other Python threads go on meanwhile.
           py::call_guard<py::gil_scoped_release>())
      .def("perform_nocolor_split", &ProcessGroupConflux::performNocolorSplit, py::arg("device"),
           py::call_guard<py::gil_scoped_release>());
  m.def("library_version", [] {
    int v = 0;
    cfxGetVersion(&v);
    return v;
  }, "Version code of the Conflux library in use (major * 10000 + minor * 100 + patch).");
  m.def("library_has_cuda", &conflux_torch::libraryHasCuda,
        "Whether the Conflux library in use accepts CUDA device buffers.");
  m.def("built_with_cuda", [] { return CONFLUX_TORCH_CUDA != 0; },
        "Whether this extension was built with CUDA tensor support.");
}
