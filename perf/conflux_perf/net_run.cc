// conflux-perf net: starts the two ranks, opens every target, and runs the size sweep with the targets
// interleaved per size (so that drift on a shared machine hits them alike); rank 0 prints the table.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "conflux/conflux.h"
#include "buffer.h"
#include "launch.h"
#include "net_bench.h"
#include "net_options.h"
#include "sysinfo.h"

namespace cfxperf {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct Row {
  double latUs = 0, uniGBs = 0, bidirGBs = 0;
  size_t wrong = 0;
};

void printHeader(const NetOptions& o, const std::vector<std::unique_ptr<NetTarget>>& targets,
                 const std::string& launch) {
  std::printf("# conflux-perf net: 2 ranks (%s) on %s, %s; %s\n", launch.c_str(), hostName().c_str(),
              cpuModel().c_str(), o.pin ? "pinned, rank r on core r" : ("cores " + affinityList()).c_str());
  std::printf("# window %d (capped per target), medians of %d batches, iterations per batch %s\n", o.window,
              o.repeats, o.iters > 0 ? std::to_string(o.iters).c_str() : "by size");
  for (size_t i = 0; i < targets.size(); ++i) {
    std::printf("# [%zu] %s; window %d\n", i, targets[i]->describe().c_str(),
                std::min(o.window, targets[i]->maxInFlight()));
  }
  std::printf("# lat: half round trip; uni: one direction, window then 1-byte ack; bidir: both directions' bytes\n");
  std::printf("# +lat_us and the x columns compare each target with [0]\n#\n");
  std::printf("# %10s  %-12s %9s", "bytes", "target", "lat_us");
  if (o.uni) std::printf(" %9s", "uni_GB/s");
  if (o.bidir) std::printf(" %10s", "bidir_GB/s");
  std::printf(" %8s", "+lat_us");
  if (o.uni) std::printf(" %6s", "uni_x");
  if (o.bidir) std::printf(" %7s", "bidir_x");
  std::printf(" %7s\n", "#wrong");
}

void printRow(const NetOptions& o, size_t bytes, const std::string& label, const Row& r, const Row* base) {
  std::printf("  %10zu  %-12s %9.2f", bytes, label.substr(0, 12).c_str(), r.latUs);
  // %g keeps small bandwidths readable (and positive) where three decimals would print 0.000.
  if (o.uni) std::printf(" %9.4g", r.uniGBs);
  if (o.bidir) std::printf(" %10.4g", r.bidirGBs);
  if (base == nullptr) {
    std::printf(" %8s", "-");
    if (o.uni) std::printf(" %6s", "-");
    if (o.bidir) std::printf(" %7s", "-");
  } else {
    std::printf(" %+8.2f", r.latUs - base->latUs);
    if (o.uni) std::printf(" %6.2f", base->uniGBs > 0 ? r.uniGBs / base->uniGBs : 0.0);
    if (o.bidir) std::printf(" %7.2f", base->bidirGBs > 0 ? r.bidirGBs / base->bidirGBs : 0.0);
  }
  std::printf(" %7zu\n", r.wrong);
}

// One rank's whole run over `comm` (two ranks). Returns the exit status.
int runRank(const NetOptions& o, cfxComm_t comm, const std::string& launch) {
  int rank = 0, nranks = 0;
  checkResult(cfxCommUserRank(comm, &rank), "cfxCommUserRank");
  checkResult(cfxCommCount(comm, &nranks), "cfxCommCount");
  if (nranks != 2) throw std::runtime_error("conflux-perf net runs between exactly 2 ranks, not " + std::to_string(nranks));
  Barrier barrier = [comm] {
    int one = 1, sum = 0;
    checkResult(cfxAllReduce(&one, &sum, 1, cfxInt32, cfxSum, comm, nullptr), "barrier");
  };
  PeerExchange exchange = [comm, rank](const std::vector<uint8_t>& mine) {
    uint64_t sizes[2] = {}, size = mine.size();
    checkResult(cfxAllGather(&size, sizes, 1, cfxUint64, comm, nullptr), "exchange of sizes");
    if (sizes[0] != sizes[1]) throw std::runtime_error("the ranks' exchange blobs differ in size (different builds?)");
    std::vector<uint8_t> all(2 * mine.size());
    checkResult(cfxAllGather(mine.data(), all.data(), mine.size(), cfxUint8, comm, nullptr), "exchange");
    const size_t peer = size_t(1 - rank) * mine.size();
    return std::vector<uint8_t>(all.begin() + long(peer), all.begin() + long(peer + mine.size()));
  };
  Buffer send(o.maxBytes), recv(o.maxBytes);
  const NetBuffers buffers{reinterpret_cast<uint8_t*>(send.get()), reinterpret_cast<uint8_t*>(recv.get()),
                           std::max<size_t>(o.maxBytes, 1)};
  std::vector<std::unique_ptr<NetTarget>> targets;
  for (const NetTargetSpec& spec : o.targets) {
    targets.push_back(spec.raw ? makeRawTarget(rank, buffers, exchange)
                               : makePluginTarget(spec.plugin, o.version, o.device, spec.merge, buffers, exchange));
  }
  if (rank == 0) printHeader(o, targets, launch);
  size_t wrongTotal = 0;
  for (size_t bytes = o.minBytes;; bytes = std::max(bytes * o.stepFactor, bytes + 1)) {
    std::vector<Row> rows(targets.size());
    std::vector<std::vector<double>> lat(targets.size()), uni(targets.size()), bidir(targets.size());
    std::vector<NetLoop> loops(targets.size());
    for (size_t t = 0; t < targets.size(); ++t) {
      NetLoop& l = loops[t];
      l.rank = rank;
      l.bytes = bytes;
      l.window = std::min(o.window, targets[t]->maxInFlight());
      l.buffers = buffers;
      l.barrier = barrier;
      size_t wrong = checkExchange(*targets[t], l, int(t));
      uint64_t mine = wrong, both[2] = {};
      checkResult(cfxAllGather(&mine, both, 1, cfxUint64, comm, nullptr), "gathering the check");
      rows[t].wrong = size_t(both[0] + both[1]);
      wrongTotal += rows[t].wrong;
    }
    for (int rep = 0; rep < o.repeats; ++rep) {
      for (size_t t = 0; t < targets.size(); ++t) {
        NetLoop l = loops[t];
        l.iters = o.iters > 0 ? o.iters : autoLatencyIters(bytes);
        lat[t].push_back(measureLatency(*targets[t], l) * 1e6);
        l.iters = o.iters > 0 ? o.iters : autoBandwidthIters(bytes, l.window);
        const double moved = double(bytes) * l.window;  // per iteration and direction
        if (o.uni) {
          const double secs = measureUni(*targets[t], l);
          if (rank == 0) uni[t].push_back(moved / secs / 1e9);
        }
        if (o.bidir) {
          const double secs = measureBidir(*targets[t], l);
          if (rank == 0) bidir[t].push_back(2 * moved / secs / 1e9);
        }
      }
    }
    if (rank == 0) {
      for (size_t t = 0; t < targets.size(); ++t) {
        rows[t].latUs = median(lat[t]);
        if (o.uni) rows[t].uniGBs = median(uni[t]);
        if (o.bidir) rows[t].bidirGBs = median(bidir[t]);
        printRow(o, bytes, targets[t]->label(), rows[t], t == 0 ? nullptr : &rows[0]);
      }
      std::fflush(stdout);
    }
    if (bytes >= o.maxBytes || bytes * o.stepFactor > o.maxBytes) break;
  }
  barrier();
  targets.clear();  // close every target before the communicator goes
  checkResult(cfxCommDestroy(comm), "cfxCommDestroy");
  if (rank == 0) {
    std::printf("# %s\n", wrongTotal == 0 ? "every checked byte was right" : (std::to_string(wrongTotal) + " bytes wrong").c_str());
  }
  return wrongTotal == 0 ? 0 : 1;
}

int guarded(const NetOptions& o, const std::function<cfxComm_t()>& makeComm, const std::string& launch) {
  cfxComm_t comm = makeComm();
  int rank = -1;
  cfxCommUserRank(comm, &rank);
  try {
    return runRank(o, comm, launch);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "conflux-perf net: rank %d: %s\n", rank, e.what());
    return 1;
  }
}

}  // namespace

int runNet(int argc, char** argv) {
  NetOptions o;
  std::string error;
  switch (parseNetOptions(argc, argv, &o, &error)) {
    case NetParse::Help:
      std::fputs(netUsageText().c_str(), stdout);
      return 0;
    case NetParse::Error:
      std::fprintf(stderr, "conflux-perf net: %s\n", error.c_str());
      return 2;
    case NetParse::Ok:
      break;
  }
  for (const NetTargetSpec& spec : o.targets) {
    if (!spec.raw && ::access(spec.plugin.c_str(), R_OK) != 0 && spec.plugin.find('/') != std::string::npos) {
      std::fprintf(stderr, "conflux-perf net: --plugin %s: %s\n", spec.plugin.c_str(), std::strerror(errno));
      return 2;
    }
  }
  try {
    if (o.ranks == 0 && !launcherEnvPresent()) o.ranks = 2;
    if (o.ranks > 0) {
      // Both ranks on this machine: loopback is the device, unless the caller named one.
      setenv("CONFLUX_OFI_DOMAINS", "lo", 0);
      return forkRanks(o.ranks, [&](int r, const std::function<cfxComm_t()>& makeComm) {
        if (o.pin && !pinToCore(r % onlineCores())) std::fprintf(stderr, "conflux-perf net: could not pin rank %d\n", r);
        return guarded(o, makeComm, "forked by conflux-perf");
      });
    }
    if (o.pin) {
      const int local = launcherLocalRank();
      pinToCore((local >= 0 ? local : 0) % onlineCores());
    }
    return guarded(o, [] {
      cfxComm_t comm = nullptr;
      checkResult(cfxCommInitFromEnv(&comm), "cfxCommInitFromEnv");
      return comm;
    }, "launcher environment");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "conflux-perf net: %s\n", e.what());
    return 1;
  }
}

}  // namespace cfxperf
