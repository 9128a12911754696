// ccl_allreduce_perf.cpp - the oneCCL twin of allreduce_perf: the same flags, sweep, data, check
// and table (all of it perf/perf_common.c, as for the MPI twins of bench/mpi_allreduce_perf.c),
// with Intel oneCCL's ccl::allreduce (C++ API) doing the communication, so bench/compare.sh can
// put oneCCL next to libhccl, MPI, gloo and DeepSpeed.
//
// It is not part of the CMake build: the project must not depend on oneCCL. compare.sh builds
// it into <build>/bin when it installs oneCCL from PyPI (oneccl-cpu + oneccl-devel;
// bench/anchors.sh's setup_oneccl), with the driver's C files (perf/perf_common.c,
// perf_args.c, perf_coll.c, perf_data.c) compiled beside it, roughly:
//
//   cc -O2 -Iperf -c perf/perf_common.c perf/perf_args.c perf/perf_coll.c perf/perf_data.c
//   g++ -O2 -std=c++17 -Iperf -I$P/include bench/ccl_allreduce_perf.cpp perf_*.o
//       -L$P/lib -lccl -Wl,-rpath,$P/lib -o build/bin/ccl_allreduce_perf
//
// and starts it the way oneCCL documents, under Intel MPI's mpiexec (shipped by impi-rt,
// which oneccl-cpu depends on):
//
//   mpiexec -n 4 build/bin/ccl_allreduce_perf -b 4K -e 64M -f 4 -d bfloat16
//
// One process per rank. The rank and the number of ranks come from the launcher's
// environment: PMI_RANK/PMI_SIZE (Intel MPI, MPICH), OMPI_COMM_WORLD_RANK/SIZE (Open MPI) or
// RANK/WORLD_SIZE (npu-launch, torchrun). oneCCL's examples pass the main key-value store's
// address with MPI_Bcast; this program passes it through a file instead, so it links no MPI:
// rank 0 writes $CCL_PERF_KVS_FILE (default /tmp/ccl_allreduce_perf.<uid>.<parent pid>: the
// launcher's proxy is every local rank's parent), the others wait for it for up to 60 s.
//
// Flags: perf/perf_flags.h's rows for PERF_BY_CCL (no -r, no -R; -z is accepted and shown,
// every call blocks). Types and ops: allreduce_perf's twelve types (half is
// ccl::datatype::float16) and sum, prod, max, min, avg, each checked bit for bit against
// allreduce_perf's own data. Before the first line of a (type, op) every rank makes one
// 1-element call (ccl_refuses); if oneCCL throws, the pair is refused: a
// "# bfloat16 sum: skipped: oneCCL refuses it (...)" line where -d all or -o all chose it, a
// failed call (exit 1) where both were named. (A oneCCL that aborts instead of throwing ends
// the run with its own |CCL_ERROR| line.) The header names the CPU features oneCCL's
// bfloat16 and float16 kernels use (its docs, "Low-precision datatypes": AVX512F or
// AVX512_BF16 for bfloat16, F16C or AVX512F for float16) and CCL_BF16/CCL_FP16 if set.
#include <oneapi/ccl.hpp>

#include <unistd.h>

extern "C" {
#include "perf_common.h"
}

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

std::string errmsg = "no error";
ccl::shared_ptr_class<ccl::kvs> kvs;
std::unique_ptr<ccl::communicator> comm;
int nranks = 1;

// allreduce_perf's types and ops as oneCCL's (perf_common.h's order).
ccl::datatype ccl_type(perf_type t) {
  switch (t) {
  case PERF_INT8: return ccl::datatype::int8;
  case PERF_UINT8: return ccl::datatype::uint8;
  case PERF_INT16: return ccl::datatype::int16;
  case PERF_UINT16: return ccl::datatype::uint16;
  case PERF_INT32: return ccl::datatype::int32;
  case PERF_UINT32: return ccl::datatype::uint32;
  case PERF_INT64: return ccl::datatype::int64;
  case PERF_UINT64: return ccl::datatype::uint64;
  case PERF_HALF: return ccl::datatype::float16;
  case PERF_BF16: return ccl::datatype::bfloat16;
  case PERF_FLOAT: return ccl::datatype::float32;
  default: return ccl::datatype::float64;
  }
}

ccl::reduction ccl_op(perf_op op) {
  switch (op) {
  case PERF_SUM: return ccl::reduction::sum;
  case PERF_PROD: return ccl::reduction::prod;
  case PERF_MAX: return ccl::reduction::max;
  case PERF_MIN: return ccl::reduction::min;
  default: return ccl::reduction::avg;
  }
}

// The first of these variables that is set gives the value; -1 when none is.
int first_env_int(std::initializer_list<const char *> names) {
  for (const char *n : names)
    if (const char *v = std::getenv(n)) return std::atoi(v);
  return -1;
}

// Rank 0 creates the main key-value store and leaves its address in `path` (written to a
// temporary name and renamed, so a reader never sees half of it); the others wait for the
// file, up to 60 s, and attach to the store.
ccl::shared_ptr_class<ccl::kvs> exchange_kvs(int rank, const std::string &path) {
  ccl::kvs::address_type addr;
  if (rank == 0) {
    auto main_kvs = ccl::create_main_kvs();
    addr = main_kvs->get_address();
    std::string tmp = path + ".tmp";
    FILE *f = std::fopen(tmp.c_str(), "wb");
    if (!f || std::fwrite(addr.data(), 1, addr.size(), f) != addr.size() ||
        std::fclose(f) != 0 || std::rename(tmp.c_str(), path.c_str()) != 0)
      throw std::runtime_error("cannot write the key-value store's address to " + path + ": " +
                               std::strerror(errno));
    return main_kvs;
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    if (FILE *f = std::fopen(path.c_str(), "rb")) {
      size_t got = std::fread(addr.data(), 1, addr.size(), f);
      std::fclose(f);
      if (got == addr.size()) break;
    }
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("rank 0 did not write the key-value store's address to " + path +
                               " within 60 s (is rank 0 running, with the same "
                               "CCL_PERF_KVS_FILE?)");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return ccl::create_kvs(addr);
}

// What oneCCL's low-precision kernels depend on (its "Low-precision datatypes" page): one
// header line, so a bfloat16 or half result comes with the CPU it ran on.
std::string lp_features() {
  __builtin_cpu_init();
  std::string s = "# CPU features oneCCL's bfloat16/half kernels use:";
  const std::pair<const char *, int> f[] = {{"avx512f", __builtin_cpu_supports("avx512f")},
                                            {"avx512bw", __builtin_cpu_supports("avx512bw")},
                                            {"avx512_bf16", __builtin_cpu_supports("avx512bf16")},
                                            {"avx512_fp16", __builtin_cpu_supports("avx512fp16")},
                                            {"f16c", __builtin_cpu_supports("f16c")}};
  for (const auto &x : f) s += std::string(" ") + x.first + (x.second ? " yes" : " no");
  for (const char *v : {"CCL_BF16", "CCL_FP16"})
    if (const char *e = std::getenv(v)) s += std::string(", ") + v + "=" + e;
  return s;
}

// ---- the ops table ----

int ccl_init(perf_world *w) {
  int rank = first_env_int({"PMI_RANK", "OMPI_COMM_WORLD_RANK", "RANK"});
  int p = first_env_int({"PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "WORLD_SIZE"});
  if (rank < 0 || p < 1) rank = 0, p = 1; // no launcher: one rank, like allreduce_perf
  try {
    ccl::init();
    std::string path;
    if (const char *v = std::getenv("CCL_PERF_KVS_FILE"))
      path = v;
    else
      path = "/tmp/ccl_allreduce_perf." + std::to_string(getuid()) + "." +
             std::to_string(getppid());
    kvs = exchange_kvs(rank, path);
    comm = std::make_unique<ccl::communicator>(ccl::create_communicator(p, rank, kvs));
    if (rank == 0) std::remove(path.c_str()); // every rank has attached by now
  } catch (const std::exception &e) {
    errmsg = std::string("oneCCL call failed: ") + e.what();
    return 1;
  }
  nranks = w->nranks = p;
  w->rank = rank;
  w->device = rank;
  std::snprintf(w->impl, sizeof(w->impl), "oneCCL %.56s", ccl::get_library_version().full);
  return 0;
}

// Every call waits for its event: -z 0 runs each call blocking too (the header says so).
int ccl_run(const perf_call *c, int /*blocking*/) {
  try {
    switch (c->coll) {
    case PERF_ALLREDUCE:
      ccl::allreduce(c->send, c->recv, c->count, ccl_type(c->type), ccl_op(c->op), *comm).wait();
      return 0;
    case PERF_ALLGATHER: { // the driver's header: every rank's pid, host and device
      std::vector<size_t> counts((size_t)nranks, c->count);
      ccl::allgatherv(c->send, c->count, c->recv, counts, ccl_type(c->type), *comm).wait();
      return 0;
    }
    default:
      errmsg = std::string("the oneCCL twin runs allreduce only, not ") + perf_coll_name(c->coll);
      return 1;
    }
  } catch (const std::exception &e) {
    errmsg = std::string("oneCCL call failed: ") + e.what();
    return 1;
  }
}

int ccl_wait_all() {
  return 0; // every call was completed when issued
}

int ccl_barrier() {
  try {
    ccl::barrier(*comm).wait();
    return 0;
  } catch (const std::exception &e) {
    errmsg = std::string("oneCCL call failed: ccl::barrier: ") + e.what();
    return 1;
  }
}

const char *ccl_last_error() {
  return errmsg.c_str();
}

void ccl_finalize() {
  comm.reset();
  kvs.reset();
}

// The communicator goes first, as a return from main would take it: left to exit's static
// destructors, oneCCL's teardown makes the launcher report 255 instead of the code.
[[noreturn]] void ccl_abort(int code) {
  std::fflush(stdout);
  ccl_finalize();
  std::exit(code);
}

// -R is not a flag of this program (perf_flags.h); were it given one, it would say so here.
int ccl_mem_alloc(void **, size_t) {
  errmsg = "the oneCCL twin has no allocator of its own (-R)";
  return -1;
}

void ccl_mem_free(void *) {}

// Before the first line of (t, op): one 1-element allreduce. 0 when oneCCL takes it, else its
// one-line reason. Every rank calls with the same type and op, so all refuse alike.
int ccl_refuses(perf_type t, perf_op op, char *why, size_t n) {
  unsigned char in[8] = {0}, out[8] = {0};
  try {
    ccl::allreduce(in, out, 1, ccl_type(t), ccl_op(op), *comm).wait();
    return 0;
  } catch (const std::exception &e) {
    std::string w = e.what();
    w = w.substr(0, w.find('\n'));
    if (w.size() > 150) w = w.substr(0, 147) + "...";
    std::snprintf(why, n, "oneCCL refuses it (%s)", w.c_str());
    return 1;
  }
}

} // namespace

// Runs the benchmark; see perf/perf_common.h for the exit codes.
int main(int argc, char **argv) {
  static const std::string note = lp_features();
  perf_backend be = {}; // one field at a time: C++17 has no designated initializers
  be.prog = "ccl_allreduce_perf";
  be.init = ccl_init;
  be.run = ccl_run;
  be.wait_all = ccl_wait_all;
  be.barrier = ccl_barrier;
  be.last_error = ccl_last_error;
  be.finalize = ccl_finalize;
  be.abort_run = ccl_abort;
  be.mem_alloc = ccl_mem_alloc;
  be.mem_free = ccl_mem_free;
  be.note = note.c_str();
  be.has_avg = 1;
  be.by = PERF_BY_CCL;
  be.usage_note = "Start it under Intel MPI's mpiexec, one process per rank. Environment:\n"
                  "CCL_PERF_KVS_FILE, where rank 0 leaves the key-value store's address.\n"
                  "A (type, op) oneCCL refuses is a \"# ... skipped\" line when -d all or -o all "
                  "chose it.";
  be.refuses = ccl_refuses;
  return perf_main(argc, argv, PERF_ALLREDUCE, &be);
}
