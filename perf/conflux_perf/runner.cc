// conflux-perf: timing loop, rank agreement on times and errors, rows for the reports (see runner.h).
// With --memory cuda the buffers are device memory: inputs are written and results read on host copies
// (check.cc's code) moved with cudaMemcpy, and the calls are ordered on one stream per rank, timed as
// nccl-tests times them: the iterations enqueued back to back, one stream synchronization at the end.
#include "runner.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "buffer.h"
#include "check.h"
#include "device_memory.h"
#include "json.h"
#include "report.h"
#include "sysinfo.h"

namespace cfxperf {

namespace {

struct DeviceRecord {  // exchanged between ranks as bytes
  int32_t rank, pid, localRank, gpu;
  char host[112];
  char cores[128];
  char gpuName[96];
  char busId[32];
};

// The stream of a --memory cuda run; none for host memory.
std::unique_ptr<DeviceStream> makeStream(Memory memory) {
  return memory == Memory::Cuda ? std::make_unique<DeviceStream>() : nullptr;
}

class Bench {
 public:
  Bench(const Options& o, RankSetup& s)
      : o_(o), setup_(s), rank_(s.backends[0]->rank()), n_(s.backends[0]->nranks()),
        cuda_(o.memory == Memory::Cuda), stream_(makeStream(o.memory)),
        send_(o.maxBytes + o.bufferOffset, o.localRegister != 0, o.memory, s.backends),
        recv_(o.maxBytes + o.bufferOffset, o.localRegister != 0, o.memory, s.backends) {
    for (const auto& b : setup_.backends) b->setMemory(o.memory, stream_ ? stream_->get() : nullptr);
  }

  int run() {
    RunInfo info;
    info.opts = &o_;
    info.nranks = n_;
    info.launch = setup_.launch;
    info.commandLine = setup_.commandLine;
    for (const auto& b : setup_.backends) {
      info.backends.emplace_back(b->name());
      info.backendVersions.push_back(b->version());
    }
    info.cpuModel = cpuModel();
    info.cores = onlineCores();
    if (rank_ == 0) {
      if (!o_.jsonPath.empty()) {
        json_ = std::make_unique<JsonReport>(o_.jsonPath);
        printf("# Writing JSON output to %s\n", o_.jsonPath.c_str());
      }
      text_ = std::make_unique<TextReport>(stdout);
    }
    info.devices = gatherDevices();
    const CollInfo& coll = collInfo(o_.coll);
    if (coll.hasRoot && o_.root >= n_) {
      throw std::runtime_error("-r " + std::to_string(o_.root) + ": the root must be below the number of ranks (" +
                               std::to_string(n_) + ")");
    }
    if (text_) text_->header(info);
    if (json_) json_->begin(info);
    std::vector<int> roots = {coll.hasRoot ? o_.root : -1};
    if (coll.hasRoot && o_.root == -1) {
      roots.clear();
      for (int r = 0; r < n_; ++r) roots.push_back(r);
    }
    for (cfxDataType_t type : o_.types) {
      for (cfxRedOp_t op : o_.ops) {
        for (int root : roots) sweep(type, op, root);
      }
    }
    Summary s;
    s.errors = errors_;
    s.avgBusbw = busCount_ ? busSum_ / busCount_ : 0;
    s.mpiErrors = otherErrors_;
    s.mpiAvgBusbw = otherBusCount_ ? otherBusSum_ / otherBusCount_ : 0;
    s.ratioGeomean = ratioCount_ ? std::exp(logRatioSum_ / ratioCount_) : 0;
    if (const char* minBw = std::getenv("NCCL_TESTS_MIN_BW")) s.minBusbw = std::atof(minBw);
    if (text_) text_->footer(info, s);
    if (json_) json_->finish(info, s);
    const bool tooSlow = s.minBusbw >= 0 && s.avgBusbw < 0.9 * s.minBusbw;
    return errors_ || otherErrors_ || tooSlow ? 1 : 0;
  }

 private:
  std::vector<DeviceLine> gatherDevices() {
    DeviceRecord mine{};
    mine.rank = rank_;
    mine.pid = static_cast<int32_t>(getpid());
    mine.localRank = setup_.localRank;
    std::snprintf(mine.host, sizeof mine.host, "%s", hostName().c_str());
    std::snprintf(mine.cores, sizeof mine.cores, "%s", affinityList().c_str());
    mine.gpu = -1;
    if (cuda_) {
      int gpu = -1;
      std::string name, bus;
      describeDevice(&gpu, &name, &bus);
      mine.gpu = gpu;
      std::snprintf(mine.gpuName, sizeof mine.gpuName, "%s", name.c_str());
      std::snprintf(mine.busId, sizeof mine.busId, "%s", bus.c_str());
    }
    std::vector<DeviceRecord> all(static_cast<size_t>(n_));
    setup_.backends[0]->allgather(&mine, all.data(), sizeof mine);
    std::vector<DeviceLine> lines;
    for (const DeviceRecord& r : all) {
      lines.push_back({r.rank, r.pid, r.localRank, r.host, r.cores, r.gpu, r.gpuName, r.busId});
    }
    return lines;
  }

  std::vector<size_t> sizes() const {
    std::vector<size_t> out;
    for (size_t size = o_.minBytes; size <= o_.maxBytes;) {
      out.push_back(size);
      size_t next = o_.stepFactor > 1 ? size * o_.stepFactor : size + o_.stepBytes;
      if (next <= size) break;  // no growth (or overflow): one row
      size = next;
    }
    return out;
  }

  CallShape shape(size_t bytes, cfxDataType_t type, cfxRedOp_t op, int root, bool inPlace) const {
    CallShape s;
    s.coll = o_.coll;
    s.type = type;
    s.op = op;
    s.root = root < 0 ? 0 : root;
    s.rank = rank_;
    s.nranks = n_;
    s.counts = collCounts(o_.coll, bytes / typeSize(type), n_);
    s.inPlace = inPlace;
    return s;
  }

  // One call of iteration `iter`, its buffers shifted by whole call sizes through the allocation.
  void startColl(Backend& b, const CallShape& s, int iter) {
    const size_t total = std::max(s.counts.send, s.counts.recv) * typeSize(s.type);
    const size_t steps = total ? std::max<size_t>(o_.maxBytes / total, 1) : 1;
    const size_t shift = total * (static_cast<size_t>(iter) % steps);
    char* send = sendBase() + shift;
    char* recv = recvBase() + shift;
    b.run(s.coll, s.send(send, recv), s.recv(recv), s.counts.param, s.type, s.op, s.root);
    if (o_.blocking) {
      waitStream();
      b.barrier();
    }
  }

  // Device memory: waits until the calls enqueued on the stream are done (host calls are done already).
  void waitStream() {
    if (stream_) stream_->wait();
  }

  // Bytes from the start of either buffer that one call reads or writes (shift 0, as the checked calls).
  static size_t extent(const CallShape& s) { return std::max(s.counts.send, s.counts.recv) * typeSize(s.type); }

  // Writes the inputs of a checked call (check.cc's fillInputs), through host copies for device memory.
  void prepareInputs(const CallShape& s) {
    if (!cuda_) {
      fillInputs(s, sendBase(), recvBase());
      return;
    }
    if (hostSend_.empty()) {
      hostSend_.resize(std::max<size_t>(o_.maxBytes, 1));
      hostRecv_.resize(std::max<size_t>(o_.maxBytes, 1));
    }
    fillInputs(s, hostSend_.data(), hostRecv_.data());
    copyToDevice(sendBase(), hostSend_.data(), extent(s), stream_->get());
    copyToDevice(recvBase(), hostRecv_.data(), extent(s), stream_->get());
  }

  // Wrong elements of this rank's result of the call just made (waits for it on device memory).
  int64_t wrongElements(const CallShape& s) {
    if (!cuda_) return countWrong(s, recvBase());
    copyToHost(hostRecv_.data(), recvBase(), extent(s), stream_->get());  // after the call, on its stream
    return countWrong(s, hostRecv_.data());
  }

  PlaceResult bench(Backend& b, const CallShape& s, int* errorCount) {
    PlaceResult r;
    r.ran = true;
    if (o_.check) prepareInputs(s);
    startColl(b, s, 0);
    waitStream();
    b.barrier();
    if (o_.percentiles) iterEnds_.assign(static_cast<size_t>(o_.iters), {});
    const auto t0 = std::chrono::steady_clock::now();
    for (int iter = 0; iter < o_.iters; ++iter) {
      if (o_.aggIters > 1) b.groupStart();
      for (int a = 0; a < o_.aggIters; ++a) startColl(b, s, iter * o_.aggIters + a);
      if (o_.aggIters > 1) b.groupEnd();
      if (o_.percentiles) {
        waitStream();  // device memory: an iteration ends when its calls are done
        iterEnds_[static_cast<size_t>(iter)] = std::chrono::steady_clock::now();
      }
    }
    waitStream();  // device memory: the calls were only enqueued
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (o_.percentiles) percentiles(b, t0, r);
    double sec = elapsed / (static_cast<double>(o_.iters) * o_.aggIters);
    switch (o_.average) {
      case 0: sec = rank_ == 0 ? sec : 0; b.allreduce(&sec, 1, Combine::Sum); break;
      case 2: b.allreduce(&sec, 1, Combine::Min); break;
      case 3: b.allreduce(&sec, 1, Combine::Max); break;
      default: b.allreduce(&sec, 1, Combine::Sum); sec /= n_; break;
    }
    r.timeUs = sec * 1e6;
    r.algbw = sec > 0 ? algBytes(s.coll, s.counts.param, typeSize(s.type), n_) / 1e9 / sec : 0;
    r.busbw = r.algbw * busFactor(s.coll, n_);
    b.barrier();
    if (o_.check == 0) return r;
    r.wrong = 0;
    for (int c = 0; c < o_.check; ++c) {
      prepareInputs(s);
      startColl(b, s, 0);
      const int64_t local = wrongElements(s);
      double stats[2] = {static_cast<double>(local), local > 0 ? 1.0 : 0.0};
      b.allreduce(stats, 2, Combine::Sum);
      r.wrong = static_cast<int64_t>(stats[0]);
      *errorCount += static_cast<int>(stats[1]);
      if (r.wrong) break;
    }
    return r;
  }

  // --percentiles: each iteration's time per call on this rank, the largest over ranks (one all-reduce
  // after the timed loop, so none runs inside it), then p50, p99 and max by nearest rank.
  void percentiles(Backend& b, std::chrono::steady_clock::time_point t0, PlaceResult& r) {
    std::vector<double> us(iterEnds_.size());
    auto start = t0;
    for (size_t i = 0; i < us.size(); ++i) {
      us[i] = std::chrono::duration<double, std::micro>(iterEnds_[i] - start).count() / o_.aggIters;
      start = iterEnds_[i];
    }
    if (us.empty()) return;
    b.allreduce(us.data(), static_cast<int>(us.size()), Combine::Max);
    std::sort(us.begin(), us.end());
    auto nearestRank = [&](double q) {
      const size_t k = static_cast<size_t>(std::ceil(q * static_cast<double>(us.size())));
      return us[std::clamp<size_t>(k, 1, us.size()) - 1];
    };
    r.p50Us = nearestRank(0.50);
    r.p99Us = nearestRank(0.99);
    r.maxUs = us.back();
  }

  void warmup(Backend& b, cfxDataType_t type, cfxRedOp_t op, int root) {
    for (size_t bytes : {o_.maxBytes, o_.minBytes}) {
      CallShape s = shape(bytes, type, op, root, false);
      std::string why;
      if (!b.supports(s.coll, type, op, s.counts.param, &why)) continue;
      for (int iter = 0; iter < o_.warmup; ++iter) startColl(b, s, iter);
    }
    waitStream();
  }

  void sweep(cfxDataType_t type, cfxRedOp_t op, int root) {
    Backend& main = *setup_.backends[0];
    Backend* other = setup_.backends.size() > 1 ? setup_.backends[1].get() : nullptr;
    const CollInfo& coll = collInfo(o_.coll);
    const std::string redop = coll.hasOp ? opName(op) : "none";
    std::string why;
    if (!main.supports(o_.coll, type, op, 0, &why)) {
      if (text_) text_->noteOnce(std::string(main.name()) + ": " + why + "; skipping its rows");
      if (json_) json_->skipped(type, redop, why);
      return;
    }
    main.barrier();
    warmup(main, type, op, root);
    if (other) warmup(*other, type, op, root);
    for (int cycle = 0; o_.runCycles == 0 || cycle < o_.runCycles; ++cycle) {
      for (size_t bytes : sizes()) {
        RowResult row;
        const CallShape oop = shape(bytes, type, op, root, false), ip = shape(bytes, type, op, root, true);
        row.bytes = std::max(oop.counts.send, oop.counts.recv) * typeSize(type);
        row.count = oop.counts.param;
        row.type = type;
        row.redop = redop;
        row.root = root;
        if (!main.supports(o_.coll, type, op, oop.counts.param, &why)) {
          if (text_) text_->noteOnce(std::string(main.name()) + ": " + why + "; row skipped");
          continue;
        }
        row.compared = other != nullptr;
        const bool otherRuns = other && other->supports(o_.coll, type, op, oop.counts.param, &row.mpiSkipped);
        for (int p = 0; p < 2; ++p) {
          const CallShape& s = p == 0 ? oop : ip;
          row.main[p] = bench(main, s, &errors_);
          busSum_ += row.main[p].busbw;
          ++busCount_;
          if (!otherRuns) continue;
          row.mpi[p] = bench(*other, s, &otherErrors_);
          otherBusSum_ += row.mpi[p].busbw;
          ++otherBusCount_;
          if (row.main[p].timeUs > 0 && row.mpi[p].timeUs > 0) {
            logRatioSum_ += std::log(row.mpi[p].timeUs / row.main[p].timeUs);
            ++ratioCount_;
          }
        }
        if (text_) text_->row(row);
        if (json_) json_->row(row);
      }
    }
  }

  const Options& o_;
  RankSetup& setup_;
  const int rank_;
  const int n_;
  const bool cuda_;
  std::unique_ptr<DeviceStream> stream_;  // --memory cuda: the stream every call is ordered on
  Buffer send_, recv_;
  // Where the calls' buffers start: --buffer_offset bytes into the allocations' first page.
  char* sendBase() const { return send_.get() + o_.bufferOffset; }
  char* recvBase() const { return recv_.get() + o_.bufferOffset; }
  std::vector<char> hostSend_, hostRecv_;  // --memory cuda: host copies for filling and checking
  std::vector<std::chrono::steady_clock::time_point> iterEnds_;  // --percentiles: when each iteration ended
  std::unique_ptr<TextReport> text_;
  std::unique_ptr<JsonReport> json_;
  double busSum_ = 0, otherBusSum_ = 0, logRatioSum_ = 0;
  int busCount_ = 0, otherBusCount_ = 0, ratioCount_ = 0;
  int errors_ = 0, otherErrors_ = 0;
};

}  // namespace

int runBenchmark(const Options& opts, RankSetup& setup) {
  Bench bench(opts, setup);
  return bench.run();
}

}  // namespace cfxperf
