// conflux-perf: nccl-tests' text layout (widths and spacing as nccl-tests prints them).
#include "report.h"

#include <cstdarg>
#include <cstdlib>
#include <vector>

#include "collectives.h"
#include "noise.h"

namespace cfxperf {

namespace {

std::string printf2s(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string printf2s(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

std::string centered(const std::string& text, size_t width) {
  size_t left = text.size() < width ? (width - text.size()) / 2 : 0;
  std::string s = std::string(left, ' ') + text;
  return s + std::string(s.size() < width ? width - s.size() : 0, ' ');
}

const char* averageName(int average) {
  switch (average) {
    case 0: return "rank 0's";
    case 2: return "min over ranks";
    case 3: return "max over ranks";
    default: return "mean over ranks";
  }
}

std::string place(const PlaceResult& r) {
  std::string s = "  " + formatFloat(r.timeUs, 7) + "  " + formatFloat(r.algbw, 6) + "  " + formatFloat(r.busbw, 6);
  return s + (r.wrong < 0 ? std::string("    N/A") : printf2s("  %6g", static_cast<double>(r.wrong)));
}

std::string percentilePlace(const PlaceResult& r) {
  if (!r.ran || r.maxUs <= 0) return printf2s("  %7s  %7s  %7s", "N/A", "N/A", "N/A");
  return "  " + formatFloat(r.p50Us, 7) + "  " + formatFloat(r.p99Us, 7) + "  " + formatFloat(r.maxUs, 7);
}

std::string mpiPlace(const PlaceResult& mpi, const PlaceResult& main) {
  if (!mpi.ran) return printf2s("  %7s  %6s  %6s", "N/A", "N/A", "N/A");
  std::string ratio = main.timeUs > 0 ? formatFloat(mpi.timeUs / main.timeUs, 6) : std::string("   N/A");
  return "  " + formatFloat(mpi.timeUs, 7) + "  " + formatFloat(mpi.busbw, 6) + "  " + ratio;
}

}  // namespace

std::string formatFloat(double value, int width) {
  char buf[64];
  for (const char* fmt : {"%*.2f", "%*.1f", "%*.0f"}) {
    if (snprintf(buf, sizeof buf, fmt, width, value) <= width) return buf;
  }
  snprintf(buf, sizeof buf, width >= 7 ? "%*.1e" : "%*.0e", width, value);
  return buf;
}

void TextReport::header(const RunInfo& info) {
  const Options& o = *info.opts;
  compare_ = !o.compare.empty();
  percentiles_ = o.percentiles;
  if (info.backends.size() > 1) other_ = info.backends[1];
  const CollInfo& coll = collInfo(o.coll);
  int libVersion = 0;
  cfxGetVersion(&libVersion);
  fprintf(out_, "# conflux-perf version %d.%d.%d conflux-headers=%d conflux-library=%d\n", CFX_MAJOR, CFX_MINOR,
          CFX_PATCH, CFX_VERSION_CODE, libVersion);
  fprintf(out_, "# Collective test starting: %s\n", coll.ncclTestsName);
  const bool byFactor = o.stepFactor > 1;
  fprintf(out_,
          "# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d agg iters: %d "
          "validation: %d graph: 0 unalign: 0\n",
          o.minBytes, o.maxBytes, byFactor ? o.stepFactor : o.stepBytes, byFactor ? "factor" : "bytes", o.warmup,
          o.iters, o.aggIters, o.check);
  std::string backends = info.backends.empty() ? "?" : info.backends[0];
  if (info.backends.size() > 1) backends += ", compared with " + info.backends[1];
  const bool cuda = o.memory == Memory::Cuda;
  const std::string offset = o.bufferOffset == 0 ? "" : " starting " + std::to_string(o.bufferOffset) + " bytes into a page";
  fprintf(out_, "# conflux-perf: %s %s; %d rank%s (%s)%s; %s%s; time: %s (-a %d)\n", coll.command,
          backends.c_str(), info.nranks, info.nranks == 1 ? "" : "s", info.launch.c_str(),
          o.pin ? ", pinned" : "", cuda ? "CUDA device buffers, one stream per rank" : "host buffers",
          offset.c_str(), averageName(o.average), o.average);
  for (size_t i = 0; i < info.backends.size() && i < info.backendVersions.size(); ++i) {
    if (!info.backendVersions[i].empty()) {
      fprintf(out_, "# conflux-perf: %s version %s\n", info.backends[i].c_str(), info.backendVersions[i].c_str());
    }
  }
  if (const int noise = noiseInEffect(); noise > 0) {
    fprintf(out_, "# conflux-perf: noisy neighbour: %d CPU-bound processes share the cores (--noise)\n", noise);
  }
  if (o.percentiles) {
    fprintf(out_, "# conflux-perf: every iteration timed (--percentiles): p50, p99, max per call of %d iterations, "
                  "each the slowest rank's\n", o.iters);
  }
  if (o.blocking) fprintf(out_, "# Blocking Enabled: wait for completion and barrier after each collective \n");
  fprintf(out_, "#\n# Using devices\n");
  for (const DeviceLine& d : info.devices) {
    std::string cores = d.cores.find_first_of(",-") == std::string::npos ? "cpu core " + d.cores
                                                                          : "cpu cores " + d.cores;
    if (d.gpu >= 0) {  // nccl-tests' GPU line: CUDA device index, PCI bus id, name
      fprintf(out_, "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s\n", d.rank, 0, d.pid, d.host.c_str(),
              d.gpu, d.busId.c_str(), d.gpuName.c_str());
      continue;
    }
    fprintf(out_, "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] host memory, %s\n", d.rank, 0, d.pid,
            d.host.c_str(), d.localRank, cores.c_str(), info.cpuModel.c_str());
  }
  const char* t = o.reportCputime ? "cputime" : "time";
  std::string l1 = printf2s("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          ",
                            "", "", "", "", "");
  std::string l2 = printf2s("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s", "size", "count",
                            "type", "redop", "root", t, "algbw", "busbw", "#wrong", t, "algbw", "busbw", "#wrong");
  std::string l3 = printf2s("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s", "(B)",
                            "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  if (compare_) {
    const std::string& other = info.backends.size() > 1 ? info.backends[1] : std::string("mpi");
    l1 += centered(other + " out-of-place", 25) + centered(other + " in-place", 25);
    for (int i = 0; i < 2; ++i) {
      l2 += printf2s("  %7s  %6s  %6s", (other + "t").substr(0, 7).c_str(), (other + "bw").substr(0, 6).c_str(),
                     "ratio");
      l3 += printf2s("  %7s  %6s  %6s", "(us)", "(GB/s)", "(x)");
    }
  }
  if (percentiles_) {
    std::vector<std::string> groups = {info.backends.empty() ? "" : info.backends[0]};
    if (compare_) groups.push_back(other_);
    for (const std::string& name : groups) {
      for (const char* where : {" out-of-place", " in-place"}) {
        l1 += centered(name + where, 27);
        l2 += printf2s("  %7s  %7s  %7s", "p50", "p99", "max");
        l3 += printf2s("  %7s  %7s  %7s", "(us)", "(us)", "(us)");
      }
    }
  }
  fprintf(out_, "#\n%s\n%s \n%s \n", l1.c_str(), l2.c_str(), l3.c_str());
  fflush(out_);
}

void TextReport::noteOnce(const std::string& text) {
  if (!notes_.insert(text).second) return;
  fprintf(out_, "# %s\n", text.c_str());
  fflush(out_);
}

void TextReport::row(const RowResult& r) {
  if (r.compared && !r.mpiSkipped.empty()) noteOnce(other_ + ": " + r.mpiSkipped + "; its columns are N/A");
  std::string line = printf2s("%12zu  %12zu  %8s  %6s  %6i", r.bytes, r.count, typeName(r.type), r.redop.c_str(),
                              r.root);
  line += place(r.main[0]) + place(r.main[1]);
  if (compare_) line += mpiPlace(r.mpi[0], r.main[0]) + mpiPlace(r.mpi[1], r.main[1]);
  if (percentiles_) {
    line += percentilePlace(r.main[0]) + percentilePlace(r.main[1]);
    if (compare_) line += percentilePlace(r.mpi[0]) + percentilePlace(r.mpi[1]);
  }
  fprintf(out_, "%s\n", line.c_str());
  fflush(out_);
}

void TextReport::footer(const RunInfo& info, const Summary& s) {
  if (compare_) {
    const std::string& other = info.backends.size() > 1 ? info.backends[1] : std::string("mpi");
    const std::string ratio = info.backends[0] + "/" + other + " busbw ratio";
    fprintf(out_, "# %-24s : %d %s\n", (other + " wrong results").c_str(), s.mpiErrors, s.mpiErrors ? "FAILED" : "OK");
    fprintf(out_, "# %-24s : %g\n", (other + " mean busbw").c_str(), s.mpiAvgBusbw);
    fprintf(out_, "# %-24s : %g (geometric mean)\n", ratio.c_str(), s.ratioGeomean);
  }
  fprintf(out_, "# %-20s : %d %s\n", "Out of bounds values", s.errors, s.errors ? "FAILED" : "OK");
  const char* verdict = s.minBusbw < 0 ? "" : s.avgBusbw < 0.9 * s.minBusbw ? "FAILED" : "OK";
  fprintf(out_, "# %-20s : %g %s\n", "Avg bus bandwidth", s.avgBusbw, verdict);
  fprintf(out_, "#\n# Collective test concluded: %s\n#\n\n", collInfo(info.opts->coll).ncclTestsName);
  fflush(out_);
}

}  // namespace cfxperf
