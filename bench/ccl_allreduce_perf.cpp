// ccl_allreduce_perf.cpp - allreduce_perf's table for Intel oneCCL's allreduce (C++ API), so
// bench/compare.sh can put oneCCL next to libhccl, MPI, gloo and DeepSpeed.
//
// It is not part of the CMake build: the project must not depend on oneCCL. compare.sh
// builds it into <build>/bin when it installs oneCCL from PyPI (oneccl-cpu + oneccl-devel;
// bench/README.md), with perf/perf_data.c (C, the checking data) beside it, roughly:
//
//   cc -O2 -Iperf -c perf/perf_data.c -o perf_data.o
//   g++ -O2 -std=c++17 -Iperf -I$P/include bench/ccl_allreduce_perf.cpp perf_data.o
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
// Types and ops: allreduce_perf's twelve types (-d, its names: half is ccl::datatype::float16)
// and sum, prod, max, min, avg (-o), each checked bit for bit against allreduce_perf's own data
// (perf/perf_data.c: small integers whose reduction is exact in every order and type, so the
// check is equality for bfloat16 and half too). Before the first line of a (type, op) every
// rank makes one 1-element call; if oneCCL throws, the pair is refused: a
// "# bfloat16 sum: skipped: oneCCL refuses it (...)" line where -d all or -o all chose it, a
// failed call (exit 1) where both were named. (A oneCCL that aborts instead of throwing ends
// the run with its own |CCL_ERROR| line.) The header names the CPU features oneCCL's
// bfloat16 and float16 kernels use (its docs, "Low-precision datatypes": AVX512F or
// AVX512_BF16 for bfloat16, F16C or AVX512F for float16) and CCL_BF16/CCL_FP16 if set.
//
// Same flags, loop, table, footer and exit codes as bench/torch_allreduce_perf.py: 0 ok, 1
// wrong results or a failed call, 2 bad flags. busbw = algbw * 2(p-1)/p as in nccl-tests.
#include <oneapi/ccl.hpp>

#include <unistd.h>

extern "C" {
#include "perf_data.h"
}

#include <chrono>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

const char *const PROG = "ccl_allreduce_perf";
const char *const AVG[] = {"rank0", "avg", "min", "max"};
const char *const USAGE =
    "Usage: ccl_allreduce_perf [flags]   (one process per rank, e.g. under mpiexec; rank 0 "
    "prints)\n"
    "  -b <bytes>  smallest size (K, M, G = powers of 1024)                      default 32M\n"
    "  -e <bytes>  largest size, >= -b                                           default 32M\n"
    "  -f <n>      multiply the size by n (>= 2) each step                       default 2\n"
    "  -i <bytes>  add this many bytes each step instead of -f\n"
    "  -n <n>      timed iterations per line (>= 1)                              default 20\n"
    "  -w <n>      warm-up iterations (>= 0)                                     default 1\n"
    "  -c <0|1>    check the results                                             default 1\n"
    "  -d <type>   int8, uint8, int16, uint16, int32, uint32, int64, uint64, half,\n"
    "              bfloat16, float, double or all                                default float\n"
    "  -o <op>     sum, prod, max, min, avg or all                               default sum\n"
    "  -a <0-3>    time across ranks: 0 rank 0, 1 average, 2 min, 3 max         default 1\n"
    "  -z <0|1>    accepted and shown in the header; every call blocks          default 1\n"
    "  -g 1, -t 1  accepted for nccl-tests command lines\n"
    "  -h, --help  this help\n"
    "Environment: CCL_PERF_KVS_FILE, where rank 0 leaves the key-value store's address.\n"
    "allreduce_perf's table and exit codes: 0 ok, 1 wrong results or a failed call, 2 bad "
    "flags.\n"
    "A (type, op) oneCCL refuses is a \"# ... skipped\" line when -d all or -o all chose it.\n";

struct opts {
    long long b = 32LL << 20, e = 32LL << 20, step_factor = 2, step_bytes = 0;
    int n = 20, w = 1, c = 1, a = 1, z = 1;
    std::vector<perf_type> types = {PERF_FLOAT};
    std::vector<perf_op> ops = {PERF_SUM};
    bool chosen = true; // both -d and -o name one: a refusal is a failure, not a skipped line
};

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

[[noreturn]] void usage_error(int rank, const std::string &msg) {
    if (rank == 0)
        std::fprintf(stderr, "%s: %s\nRun '%s --help' for the list of flags.\n", PROG,
                     msg.c_str(), PROG);
    std::exit(2);
}

long long parse_size(int rank, char flag, const char *s) {
    char *end = nullptr;
    long long v = std::strtoll(s, &end, 10);
    long long m = 1;
    if (end != s && *end && !end[1]) {
        m = (*end == 'K' || *end == 'k')   ? 1LL << 10
            : (*end == 'M' || *end == 'm') ? 1LL << 20
            : (*end == 'G' || *end == 'g') ? 1LL << 30
                                           : 0;
        ++end;
    }
    if (end == s || *end || m == 0 || v < 0)
        usage_error(rank, std::string("-") + flag + " '" + s +
                              "' is not a size: expected a number of bytes with an optional K, "
                              "M or G suffix (powers of 1024), e.g. 8, 4K, 64M");
    return v * m;
}

long long parse_int(int rank, char flag, const char *s, long long lo, long long hi) {
    char *end = nullptr;
    long long v = std::strtoll(s, &end, 10);
    if (end == s || *end || v < lo || v > hi)
        usage_error(rank, std::string("-") + flag + " '" + s +
                              "' is not valid: expected an integer from " +
                              std::to_string(lo) + " to " + std::to_string(hi));
    return v;
}

opts parse_args(int rank, int argc, char **argv) {
    opts o;
    bool seen_f = false, seen_i = false;
    for (int k = 1; k < argc; k += 2) {
        const char *a = argv[k];
        if (!std::strcmp(a, "-h") || !std::strcmp(a, "--help")) {
            std::fputs(USAGE, stdout);
            std::exit(0);
        }
        if (std::strlen(a) != 2 || a[0] != '-' || !std::strchr("befinwcdoazgt", a[1]))
            usage_error(rank, a[0] == '-' ? std::string("unknown flag ") + a
                                          : std::string("unexpected argument '") + a +
                                                "': every setting is a flag with a value");
        if (k + 1 >= argc)
            usage_error(rank, std::string("flag ") + a + " needs a value");
        const char f = a[1], *v = argv[k + 1];
        switch (f) {
        case 'b': o.b = parse_size(rank, f, v); break;
        case 'e': o.e = parse_size(rank, f, v); break;
        case 'i': o.step_bytes = parse_size(rank, f, v), seen_i = true; break;
        case 'f': o.step_factor = parse_int(rank, f, v, 2, 1 << 30), seen_f = true; break;
        case 'n': o.n = (int)parse_int(rank, f, v, 1, 100000000); break;
        case 'w': o.w = (int)parse_int(rank, f, v, 0, 100000000); break;
        case 'c': o.c = (int)parse_int(rank, f, v, 0, 1); break;
        case 'z': o.z = (int)parse_int(rank, f, v, 0, 1); break;
        case 'a': o.a = (int)parse_int(rank, f, v, 0, 3); break;
        case 'd':
            o.types.clear();
            for (int t = 0; t < PERF_NTYPES; t++)
                if (!std::strcmp(v, "all") || !std::strcmp(v, perf_type_name((perf_type)t)))
                    o.types.push_back((perf_type)t);
            if (o.types.empty())
                usage_error(rank, std::string("-d '") + v +
                                      "' is not a type: expected int8, uint8, int16, uint16, "
                                      "int32, uint32, int64, uint64, half, bfloat16, float, "
                                      "double or all");
            break;
        case 'o':
            o.ops.clear();
            for (int op = 0; op < PERF_NOPS; op++)
                if (!std::strcmp(v, "all") || !std::strcmp(v, perf_op_name((perf_op)op)))
                    o.ops.push_back((perf_op)op);
            if (o.ops.empty())
                usage_error(rank, std::string("-o '") + v +
                                      "' is not an op: expected sum, prod, max, min, avg or all");
            break;
        default: // -g, -t
            if (std::strcmp(v, "1"))
                usage_error(rank, std::string("-") + f + " '" + v +
                                      "' is not supported: one device and one thread per "
                                      "process");
        }
    }
    if (seen_i && o.step_bytes == 0)
        usage_error(rank, "-i '0' is not valid: the increment must be at least 1 byte");
    if (seen_f && seen_i)
        usage_error(rank, "-f and -i both given: the size either grows by a factor (-f) or "
                          "by a fixed step (-i), choose one");
    if (seen_i) o.step_factor = 0;
    o.chosen = o.types.size() == 1 && o.ops.size() == 1;
    if (o.e < o.b)
        usage_error(rank, "-e " + std::to_string(o.e) + " is smaller than -b " +
                              std::to_string(o.b) +
                              ": the largest size must be at least the smallest");
    return o;
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
        auto kvs = ccl::create_main_kvs();
        addr = kvs->get_address();
        std::string tmp = path + ".tmp";
        FILE *f = std::fopen(tmp.c_str(), "wb");
        if (!f || std::fwrite(addr.data(), 1, addr.size(), f) != addr.size() ||
            std::fclose(f) != 0 || std::rename(tmp.c_str(), path.c_str()) != 0)
            throw std::runtime_error("cannot write the key-value store's address to " + path +
                                     ": " + std::strerror(errno));
        return kvs;
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (;;) {
        if (FILE *f = std::fopen(path.c_str(), "rb")) {
            size_t got = std::fread(addr.data(), 1, addr.size(), f);
            std::fclose(f);
            if (got == addr.size()) break;
        }
        if (std::chrono::steady_clock::now() > deadline)
            throw std::runtime_error("rank 0 did not write the key-value store's address to " +
                                     path + " within 60 s (is rank 0 running, with the same "
                                     "CCL_PERF_KVS_FILE?)");
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return ccl::create_kvs(addr);
}

// Before the first line of (t, op): one 1-element allreduce. Empty when oneCCL takes it, else
// its one-line reason. Every rank calls with the same type and op, so all refuse alike.
std::string refusal(perf_type t, perf_op op, const ccl::communicator &comm) {
    unsigned char in[8] = {0}, out[8] = {0};
    try {
        ccl::allreduce(in, out, 1, ccl_type(t), ccl_op(op), comm).wait();
        return "";
    } catch (const std::exception &e) {
        std::string why = e.what();
        why = why.substr(0, why.find('\n'));
        return why.size() <= 150 ? why : why.substr(0, 147) + "...";
    }
}

// What oneCCL's low-precision kernels depend on (its "Low-precision datatypes" page): one
// header line, so a bfloat16 or half result comes with the CPU it ran on.
std::string lp_features() {
    __builtin_cpu_init();
    std::string s = "# CPU features oneCCL's bfloat16/half kernels use:";
    const std::pair<const char *, int> f[] = {
        {"avx512f", __builtin_cpu_supports("avx512f")},
        {"avx512bw", __builtin_cpu_supports("avx512bw")},
        {"avx512_bf16", __builtin_cpu_supports("avx512bf16")},
        {"avx512_fp16", __builtin_cpu_supports("avx512fp16")},
        {"f16c", __builtin_cpu_supports("f16c")}};
    for (const auto &x : f) s += std::string(" ") + x.first + (x.second ? " yes" : " no");
    for (const char *v : {"CCL_BF16", "CCL_FP16"})
        if (const char *e = std::getenv(v)) s += std::string(", ") + v + "=" + e;
    return s;
}

int run_job(int argc, char **argv) {
    int rank = first_env_int({"PMI_RANK", "OMPI_COMM_WORLD_RANK", "RANK"});
    int p = first_env_int({"PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "WORLD_SIZE"});
    if (rank < 0 || p < 1) rank = 0, p = 1; // no launcher: one rank, like allreduce_perf
    opts o = parse_args(rank, argc, argv);

    ccl::init();
    std::string path;
    if (const char *v = std::getenv("CCL_PERF_KVS_FILE"))
        path = v;
    else
        path = "/tmp/ccl_allreduce_perf." + std::to_string(getuid()) + "." +
               std::to_string(getppid());
    auto kvs = exchange_kvs(rank, path);
    auto comm = ccl::create_communicator(p, rank, kvs);
    if (rank == 0) std::remove(path.c_str()); // every rank has attached by now

    // header: every rank's pid, gathered (allgatherv of ints) like allreduce_perf does
    std::vector<int> me = {rank, (int)getpid()}, all(2 * p);
    std::vector<size_t> counts(p, 2);
    ccl::allgatherv(me.data(), 2, all.data(), counts, comm).wait();
    if (rank == 0) {
        char host[256] = "?";
        gethostname(host, sizeof host);
        std::printf("# %s (oneCCL %s) nranks %d\n", PROG,
                    ccl::get_library_version().full, p);
        if (o.step_factor > 1)
            std::printf("# minBytes %lld maxBytes %lld step: %lld(factor)", o.b, o.e,
                        o.step_factor);
        else
            std::printf("# minBytes %lld maxBytes %lld step: %lld(bytes)", o.b, o.e,
                        o.step_bytes);
        std::printf(" warmup iters: %d iters: %d validation: %d average: %d(%s) blocking: %d\n",
                    o.w, o.n, o.c, o.a, AVG[o.a], o.z);
        std::printf("# Loop order: for each size, for each type, for each op; out-of-place "
                    "then in-place\n%s\n#\n# Using devices\n",
                    lp_features().c_str());
        for (int r = 0; r < p; r++)
            std::printf("#  Rank %2d Group  0 Pid %6d on %10s device %2d\n", all[2 * r],
                        all[2 * r + 1], host, all[2 * r]);
        std::printf("#\n#%62sout-of-place%23sin-place          \n", "", "");
        std::printf("#       size         count      type   redop    root     time   algbw   "
                    "busbw #wrong     time   algbw   busbw #wrong\n");
        std::printf("#        (B)    (elements)                               (us)  (GB/s)  "
                    "(GB/s)            (us)  (GB/s)  (GB/s)       \n");
        std::fflush(stdout);
    }

    auto combine = [&](double us) {
        if (o.a == 0) return us;
        float t = (float)us, r = 0;
        const ccl::reduction red[] = {ccl::reduction::sum, ccl::reduction::sum,
                                      ccl::reduction::min, ccl::reduction::max};
        ccl::allreduce(&t, &r, 1, red[o.a], comm).wait();
        return o.a == 1 ? (double)r / p : (double)r;
    };

    perf_tables tb;
    if (perf_tables_init(&tb, rank, p) != 0)
        throw std::runtime_error("out of memory for the checking tables of " +
                                 std::to_string(p) + " ranks");
    std::map<std::pair<int, int>, std::string> refused; // (type, op) -> oneCCL's reason
    std::vector<unsigned char> send, recvbuf;
    long long total_wrong = 0;
    double bw_sum = 0;
    int nbw = 0;
    for (long long size = o.b;;) {
        for (perf_type t : o.types) {
            const size_t es = perf_type_size(t), count = (size_t)size / es, nbytes = count * es;
            send.resize(nbytes);
            recvbuf.resize(nbytes);
            for (perf_op op : o.ops) {
                const char *tname = perf_type_name(t), *oname = perf_op_name(op);
                auto key = std::make_pair((int)t, (int)op);
                if (!refused.count(key)) {
                    const std::string why = refused[key] = refusal(t, op, comm);
                    if (!why.empty() && o.chosen)
                        throw std::runtime_error(std::string("allreduce of ") + tname +
                                                 " with " + oname + " refused: " + why);
                    if (!why.empty() && rank == 0) {
                        std::printf("# %s %s: skipped: oneCCL refuses it (%s)\n", tname, oname,
                                    why.c_str());
                        std::fflush(stdout);
                    }
                }
                if (!refused[key].empty()) continue;
                perf_tables_reduction(&tb, t, op);
                const perf_seq in = perf_seq_input(&tb, rank), want = perf_seq_result(&tb);
                char line[256];
                int len = std::snprintf(line, sizeof line, "%12zu  %12zu  %8s  %6s  %6d", nbytes,
                                        count, tname, oname, -1);
                for (int inplace = 0; inplace < 2; inplace++) {
                    unsigned char *recv = inplace ? send.data() : recvbuf.data();
                    // out of place the receive buffer starts as the sentinel, as in allreduce_perf
                    auto fill = [&] {
                        if (!inplace) std::memset(recv, PERF_SENTINEL_BYTE, nbytes);
                        perf_fill(send.data(), count, &in, 0);
                    };
                    auto call = [&] {
                        ccl::allreduce(send.data(), recv, count, ccl_type(t), ccl_op(op), comm)
                            .wait();
                    };
                    fill();
                    for (int k = 0; k < o.w; k++) call();
                    ccl::barrier(comm).wait();
                    auto t0 = std::chrono::steady_clock::now();
                    for (int k = 0; k < o.n; k++) call();
                    double us = std::chrono::duration<double, std::micro>(
                                    std::chrono::steady_clock::now() - t0)
                                    .count() /
                                o.n;
                    us = combine(us);
                    double algbw = us > 0 ? (double)nbytes / us / 1e3 : 0.0;
                    double busbw = algbw * 2 * (p - 1) / p;
                    char ts[32], ws[32];
                    std::snprintf(ts, sizeof ts,
                                  us >= 10000 ? "%7.0f" : us >= 100 ? "%7.1f" : "%7.2f", us);
                    if (o.c) {
                        fill();
                        call();
                        int64_t bad = perf_count_wrong(recv, count, &want, 0), w = 0;
                        if (!inplace) bad += perf_count_wrong(send.data(), count, &in, 0);
                        ccl::allreduce(&bad, &w, 1, ccl::reduction::sum, comm).wait();
                        total_wrong += w;
                        std::snprintf(ws, sizeof ws, "%5lld", (long long)w);
                    } else {
                        std::snprintf(ws, sizeof ws, "%5s", "N/A");
                    }
                    bw_sum += busbw;
                    nbw++;
                    len += std::snprintf(line + len, sizeof line - len,
                                         "  %7s  %6.2f  %6.2f  %5s", ts, algbw, busbw, ws);
                }
                if (rank == 0) {
                    std::printf("%s\n", line);
                    std::fflush(stdout);
                }
            }
        }
        long long next = o.step_factor > 1 ? size * o.step_factor : size + o.step_bytes;
        if (next > o.e || next == size) break;
        size = next;
    }
    perf_tables_free(&tb);
    if (rank == 0) {
        std::printf("# Out of bounds values : %lld %s\n", total_wrong,
                    total_wrong ? "FAILED" : "OK");
        std::printf("# Avg bus bandwidth    : %g \n#\n", nbw ? bw_sum / nbw : 0.0);
        std::fflush(stdout);
    }
    return total_wrong ? 1 : 0;
}

} // namespace

int main(int argc, char **argv) {
    try {
        return run_job(argc, argv);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "%s: rank %s: oneCCL call failed: %s\n", PROG,
                     std::getenv("PMI_RANK") ? std::getenv("PMI_RANK") : "?", e.what());
        return 1;
    }
}
