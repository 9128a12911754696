/*
 * torch_overhead.cpp - what torch_hccl itself adds to a small allreduce: the same 4 KiB float
 * sum through ProcessGroupHCCL::allreduce(...)->wait() (argument checks, Work creation, the
 * library call, completion) and through HcclAllReduce directly, on the same ranks, in turns,
 * without Python in between. Python's own dispatch (dist.all_reduce -> pybind -> the method)
 * is measured separately by bench/torch_latency.py.
 *
 *   build/bin/torch_overhead [ranks=1] [bytes=4096] [iters=20000] [shape=flat] [mode=async]
 *
 * Forks `ranks` processes; each makes a ProcessGroupHCCL over a c10d FileStore and a plain
 * communicator (HcclCommInitRootInfo, the root info passed through the same store), then runs
 * 5 rounds of (iters C calls, iters torch_hccl calls) and rank 0 prints each round's us per
 * call and the median difference.
 *
 * shape: the tensor torch_hccl is handed, always `bytes` of float data (the C call is the same
 * float sum): flat (1-D float32), 2d ([n/2, 2] float32), square ([k, k] float32, bytes a
 * square), complex64 and complex128 (a new torch.view_as_real view of a complex tensor each
 * call, as dist.all_reduce hands a complex tensor to the backend; complex128 reduces as
 * float64, so its C call is on float64), slice (every other element of a tensor twice the
 * size: non-contiguous, so staged).
 *
 * mode: async, the options' asyncOp as torch's C++ API leaves it (true: the call is queued for
 * the communicator's worker thread and wait() takes it back, pg.allreduce([t]).wait() from
 * Python), or blocking (asyncOp false, as torch 2.x's dist.all_reduce(t) sets it: the call runs
 * on the caller's thread).
 */
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <iterator>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/FileStore.hpp>

#include "process_group.hpp"

namespace {

double usPerCall(int iters, const std::function<void()>& fn) {
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; i++) fn();
  auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / iters;
}

const char* const kShapes[] = {"flat", "2d", "square", "complex64", "complex128", "slice"};

/* Sets the options' asyncOp where this torch has the field (2.8 and later; found by overload,
 * as csrc/compat.hpp reads it) and says whether it could: older torches queue every call. */
template <class Opts>
auto setAsyncOp(Opts& o, bool v, int) -> decltype(o.asyncOp = v, true) {
  o.asyncOp = v;
  return true;
}
template <class Opts>
bool setAsyncOp(Opts&, bool, long) {
  return false;
}

int rankMain(int rank, int ranks, size_t bytes, int iters, const std::string& shape,
             bool blocking, const std::string& path) {
  auto store = c10::make_intrusive<c10d::FileStore>(path, ranks);
  auto pg = c10::make_intrusive<torch_hccl::ProcessGroupHCCL>(
      store, rank, ranks, std::chrono::milliseconds(60000), "bench");
  HcclRootInfo root;
  if (rank == 0) {
    if (HcclGetRootInfo(&root) != HCCL_SUCCESS) return 1;
    store->set("root", std::vector<uint8_t>(root.internal, root.internal + sizeof(root.internal)));
  }
  auto got = store->get("root");
  std::copy(got.begin(), got.end(), root.internal);
  HcclComm comm;
  if (HcclCommInitRootInfo(ranks, &root, rank, &comm) != HCCL_SUCCESS) {
    std::fprintf(stderr, "rank %d: %s\n", rank, HcclGetLastErrorMessage());
    return 1;
  }
  bool wide = shape == "complex128";
  size_t count = bytes / (wide ? sizeof(double) : sizeof(float));
  auto n = static_cast<int64_t>(count);
  /* The C call always sums `flat`; torch_hccl gets t (or a view of whole). */
  at::Tensor flat = at::ones({n}, wide ? at::kDouble : at::kFloat), t = flat, whole;
  if (shape == "2d") t = t.view({n / 2, 2});
  if (shape == "square") {
    auto k = static_cast<int64_t>(std::sqrt(static_cast<double>(n)));
    t = at::ones({k, n / k});
  }
  if (shape == "complex64" || wide) whole = at::ones({n / 2}, wide ? at::kComplexDouble : at::kComplexFloat);
  if (shape == "slice") {
    whole = at::ones({2 * n});
    t = whole.slice(0, 0, 2 * n, 2);
  }
  std::vector<at::Tensor> ts{t};
  c10d::AllreduceOptions opts;
  setAsyncOp(opts, !blocking, 0); /* main refused blocking where it cannot be set */
  auto viaC = [&] {
    HcclAllReduce(flat.data_ptr(), flat.data_ptr(), count, wide ? HCCL_DATA_TYPE_FP64 : HCCL_DATA_TYPE_FP32,
                  HCCL_REDUCE_SUM, comm, nullptr);
  };
  auto viaTorch = [&] {
    if (whole.defined() && whole.is_complex()) ts[0] = at::view_as_real(whole);
    pg->allreduce(ts, opts)->wait();
  };
  usPerCall(iters / 10 + 1, viaC);
  usPerCall(iters / 10 + 1, viaTorch);
  std::vector<double> diff;
  for (int round = 0; round < 5; round++) {
    double c = usPerCall(iters, viaC), w = usPerCall(iters, viaTorch);
    diff.push_back(w - c);
    if (rank == 0)
      std::printf("round %d: C %.3f us, torch_hccl %.3f us, added %.3f us\n", round, c, w, w - c);
  }
  std::sort(diff.begin(), diff.end());
  if (rank == 0)
    std::printf("ranks %d, %zu bytes, %s, %s: torch_hccl adds %.3f us per call (median of 5 "
                "rounds of %d)\n", ranks, bytes, shape.c_str(), blocking ? "blocking" : "async",
                diff[2], iters);
  HcclCommDestroy(comm);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const char* usage =
      "usage: torch_overhead [ranks=1 (1-8)] [bytes=4096 (>= 16)] [iters=20000 (>= 1)]\n"
      "                      [shape=flat|2d|square|complex64|complex128|slice]\n"
      "                      [mode=async|blocking]\n";
  for (int k = 1; k < argc; k++) {
    if (!std::strcmp(argv[k], "-h") || !std::strcmp(argv[k], "--help")) {
      std::fputs(usage, stdout);
      return 0;
    }
    if (argv[k][0] == '-') {
      std::fprintf(stderr, "torch_overhead: unknown option '%s'; see torch_overhead --help\n",
                   argv[k]);
      return 2;
    }
  }
  int ranks = argc > 1 ? std::atoi(argv[1]) : 1;
  size_t bytes = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 4096;
  int iters = argc > 3 ? std::atoi(argv[3]) : 20000;
  std::string shape = argc > 4 ? argv[4] : "flat";
  std::string mode = argc > 5 ? argv[5] : "async";
  if (mode != "async" && mode != "blocking") {
    std::fprintf(stderr, "torch_overhead: mode '%s' is not async or blocking\n%s", mode.c_str(),
                 usage);
    return 2;
  }
  c10d::AllreduceOptions probe;
  if (mode == "blocking" && !setAsyncOp(probe, false, 0)) {
    std::fprintf(stderr, "torch_overhead: mode blocking needs a torch whose AllreduceOptions has "
                         "asyncOp (2.8 and later); this one queues every call\n");
    return 2;
  }
  if (ranks < 1 || ranks > 8 || bytes < 4 * sizeof(float) || iters < 1) {
    std::fputs(usage, stderr);
    return 2;
  }
  if (std::find(std::begin(kShapes), std::end(kShapes), shape) == std::end(kShapes)) {
    std::fprintf(stderr, "torch_overhead: shape '%s' is not one of flat, 2d, square, complex64, "
                         "complex128, slice\n%s", shape.c_str(), usage);
    return 2;
  }
  char dir[] = "/tmp/torch_overhead_XXXXXX";
  if (!mkdtemp(dir)) return 1;
  std::string path = std::string(dir) + "/store";
  std::vector<pid_t> kids;
  for (int r = 0; r < ranks; r++) {
    pid_t p = fork();
    if (p == 0) {
      int rc = rankMain(r, ranks, bytes, iters, shape, mode == "blocking", path);
      std::fflush(stdout); /* _exit does not flush */
      _exit(rc);
    }
    kids.push_back(p);
  }
  int bad = 0;
  for (pid_t p : kids) {
    int st = 0;
    waitpid(p, &st, 0);
    bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
  }
  unlink(path.c_str());
  rmdir(dir);
  return bad;
}
