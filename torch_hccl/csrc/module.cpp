/*
 * module.cpp - torch_hccl._C: the Python face of ProcessGroupHCCL and of the shared-memory CPU
 * allocator. torch_hccl/__init__.py registers the first with torch.distributed as backend
 * "hccl" and installs the second.
 */
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "allocator.hpp"
#include "device.hpp"
#include "process_group.hpp"
#include "settings.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_C, m) {
  m.doc() = "libhccl's ProcessGroup for torch.distributed";
  /* torch.distributed registers the ProcessGroup base class with pybind. */
  py::module::import("torch.distributed");
  /* torch 2.x: a c10d::Backend, which torch puts inside its own ProcessGroup for "cpu";
   * torch 1.13: the ProcessGroup itself (compat.hpp). */
  py::class_<torch_hccl::ProcessGroupHCCL, torch_hccl::BackendBase,
             c10::intrusive_ptr<torch_hccl::ProcessGroupHCCL>>(m, "ProcessGroupHCCL")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::duration<float> timeout, const std::string& name) {
             return c10::make_intrusive<torch_hccl::ProcessGroupHCCL>(
                 store, rank, size,
                 std::chrono::duration_cast<std::chrono::milliseconds>(timeout), name);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::arg("name") = "", py::call_guard<py::gil_scoped_release>(),
           "Joins the group's communicator through `store` (blocks until every rank has "
           "joined, or raises with libhccl's reason).")
      .def(py::init([](torch_hccl::ProcessGroupHCCL& parent, int rank, int size, int32_t color,
                       std::chrono::duration<float> timeout, const std::string& name) {
             return c10::make_intrusive<torch_hccl::ProcessGroupHCCL>(
                 parent, rank, size, color,
                 std::chrono::duration_cast<std::chrono::milliseconds>(timeout), name);
           }),
           py::arg("parent"), py::arg("rank"), py::arg("size"), py::arg("color"),
           py::arg("timeout"), py::arg("name") = "", py::call_guard<py::gil_scoped_release>(),
           "Splits the group's communicator from parent's (HcclCommSplit, key = rank; color "
           "names the group's rank list, so groups made at the same call on different ranks "
           "stay apart): every rank of parent takes part, those outside any group by "
           "split_out().")
      .def("split_out", &torch_hccl::ProcessGroupHCCL::splitOut,
           py::call_guard<py::gil_scoped_release>(),
           "This rank's part, as a non-member, in a split that other ranks make.")
      .def("agree", &torch_hccl::ProcessGroupHCCL::agree, py::arg("mine"),
           py::call_guard<py::gil_scoped_release>(),
           "Collective: whether every rank of the group passed True.")
      .def_property_readonly("alive", &torch_hccl::ProcessGroupHCCL::alive)
      .def_property_readonly("made_by", &torch_hccl::ProcessGroupHCCL::madeBy,
                             "\"store\" (HcclCommInitStore) or \"split\" (HcclCommSplit).");
  m.def("set_device", &torch_hccl::setDevice, py::arg("device"),
        "The device this process drives, for process groups made after the call "
        "(HcclSetDevice).");
  m.def("current_device", &torch_hccl::currentDevice,
        "The device this process drives: set_device's, else the default group's, else -1.");
  m.def("_allocator_install", &torch_hccl::install_allocator,
        "Reads TORCH_HCCL_ALLOCATOR and TORCH_HCCL_ALLOCATOR_MIN_BYTES (ValueError naming a "
        "bad value) and, when enabled, makes the shared-memory allocator torch's CPU "
        "allocator. Returns whether it is installed.");
  m.def("_allocator_is_current", &torch_hccl::allocator_is_current);
  m.def(
      "_allocator_settings",
      [] {
        torch_hccl::AllocatorSettings s = torch_hccl::read_allocator_settings();
        return py::make_tuple(s.enabled, s.min_bytes);
      },
      "Reads TORCH_HCCL_ALLOCATOR and TORCH_HCCL_ALLOCATOR_MIN_BYTES now, as _allocator_install "
      "does at import (ValueError naming a bad value): (enabled, min_bytes). For tests: many "
      "values in one process.");
  m.def("_split_setting", &torch_hccl::read_split_setting,
        "Reads TORCH_HCCL_SPLIT (ValueError naming a bad value): whether new_group may split "
        "the default group's communicator.");
  m.def("_memory_stats", &torch_hccl::allocator_stats);
  m.def("_empty_cache", &torch_hccl::allocator_empty_cache);
  m.def("_allocator_arenas", &torch_hccl::allocator_arenas);
  m.attr("TORCH_BACKEND_API") = py::bool_(TORCH_HCCL_BACKEND_API != 0);
  m.attr("HCCL_VERSION") = py::make_tuple(HCCL_VERSION_MAJOR, HCCL_VERSION_MINOR,
                                          HCCL_VERSION_PATCH);
}
