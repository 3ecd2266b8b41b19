// The flight recorder's ring (a seqlock per entry), its JSON dump and the SIGUSR1 dumper.
//
// The dump is written by hand rather than with a JSON library: it is a flat list of numbers and a few
// escaped strings, the library is built where nlohmann_json is absent, and a dump must not allocate
// much while a process is failing. conflux-trace reads it with nlohmann_json.
#include "src/flight_recorder.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/json_string.h"
#include "core/log.h"
#include "core/ticks.h"

namespace conflux {

namespace {

using trace_detail::kP2pBit;
using trace_detail::kStateShift;
using trace_detail::Slot;

// One process-wide scale, made with the first recorder, so that a dump rates ticks over a long span.
const TickScale& tickScale() { return processTickScale(); }

std::mutex& registryMutex() {
  static auto* m = new std::mutex;  // never destroyed: recorders may outlive static destruction
  return *m;
}
std::vector<FlightRecorder*>& registry() {
  static auto* r = new std::vector<FlightRecorder*>;
  return *r;
}

// Starts a member of the object or array being written: a comma unless it is the first, then a line
// break where `newline` asks for one (one line per entry keeps dumps readable).
void separate(std::string& out, bool newline) {
  if (out.back() != '{' && out.back() != '[') out += ',';
  if (newline) out += '\n';
}
void appendKey(std::string& out, const char* key, bool newline = false) {
  separate(out, newline);
  out += '"';
  out += key;
  out += "\":";
}
void appendField(std::string& out, const char* key, std::string_view value) {
  appendKey(out, key);
  appendJsonString(out, value);
}
void appendField(std::string& out, const char* key, int64_t value) {
  appendKey(out, key);
  out += std::to_string(value);
}

}  // namespace

const char* traceStateName(TraceState s) {
  switch (s) {
    case TraceState::Queued: return "queued";
    case TraceState::Started: return "started";
    case TraceState::Completed: return "completed";
    case TraceState::Failed: return "failed";
  }
  return "unknown";
}

FlightRecorder::FlightRecorder(TraceIdentity id, size_t entries, std::string dir)
    : id_(std::move(id)), dir_(std::move(dir)), capacity_(entries) {
  (void)tickScale();
  if (capacity_ > 0) slots_ = std::make_unique<Slot[]>(capacity_);
  std::lock_guard<std::mutex> lock(registryMutex());
  registry().push_back(this);
}

FlightRecorder::~FlightRecorder() {
  std::lock_guard<std::mutex> lock(registryMutex());
  auto& r = registry();
  r.erase(std::remove(r.begin(), r.end(), this), r.end());
}

uint32_t FlightRecorder::internAlgorithm(const std::string& name) {
  std::lock_guard<std::mutex> lock(namesMutex_);
  for (size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == name) return static_cast<uint32_t>(i + 1);
  }
  names_.push_back(name);
  return static_cast<uint32_t>(names_.size());
}

std::string FlightRecorder::algorithmName(uint32_t index) const {
  std::lock_guard<std::mutex> lock(namesMutex_);
  return index >= 1 && index <= names_.size() ? names_[index - 1] : std::string();
}

TraceCursor FlightRecorder::start(uint64_t seq, uint64_t packedKind, uint64_t count, uint64_t queuedTicks,
                                  uint64_t startTicks) {
  const uint64_t index = written_.load(std::memory_order_relaxed);
  Slot* s = slotAt(index);
  const uint32_t v = s->version.load(std::memory_order_relaxed);
  s->version.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s->seq.store(seq, std::memory_order_relaxed);
  s->kind.store(packedKind, std::memory_order_relaxed);
  s->count.store(count, std::memory_order_relaxed);
  s->algorithm.store(0, std::memory_order_relaxed);
  s->queued.store(queuedTicks, std::memory_order_relaxed);
  s->start.store(startTicks, std::memory_order_relaxed);
  s->end.store(0, std::memory_order_relaxed);
  s->wait.store(~uint64_t{0}, std::memory_order_relaxed);
  s->version.store(v + 2, std::memory_order_release);
  written_.store(index + 1, std::memory_order_release);
  TraceCursor c;
  c.slot_ = s;
  return c;
}

void FlightRecorder::noteError(const Status& s, int failedRank) {
  std::lock_guard<std::mutex> lock(errorMutex_);
  if (!error_.isOk()) return;
  error_ = s;
  failedRank_ = failedRank;
  errorWallNs_ = TickScale::wallNowNs();
}

std::vector<TraceRecord> FlightRecorder::snapshot(size_t max) const {
  std::vector<TraceRecord> out;
  if (capacity_ == 0) return out;
  const uint64_t written = written_.load(std::memory_order_acquire);
  const uint64_t n = std::min<uint64_t>({written, capacity_, max});
  out.reserve(n);
  for (uint64_t i = written - n; i < written; ++i) {
    const Slot* s = slotAt(i);
    // A rewrite overlapping the copy makes the versions differ (or odd): copy again. A slot that holds
    // another call than the i-th (the ring wrapped while we read) is left out: it is newer than the
    // snapshot, and out of order here.
    bool copied = false;
    TraceRecord r;
    for (int attempt = 0; attempt < 1000 && !copied; ++attempt) {
      const uint32_t v1 = s->version.load(std::memory_order_acquire);
      if (v1 & 1u) {
        std::this_thread::yield();
        continue;
      }
      r.seq = s->seq.load(std::memory_order_relaxed);
      r.count = s->count.load(std::memory_order_relaxed);
      r.queuedTicks = s->queued.load(std::memory_order_relaxed);
      r.startTicks = s->start.load(std::memory_order_relaxed);
      // The state is stored after the end time (release): read it first, with acquire.
      const uint64_t kind = s->kind.load(std::memory_order_acquire);
      r.endTicks = s->end.load(std::memory_order_relaxed);
      r.algorithm = s->algorithm.load(std::memory_order_relaxed);
      const uint64_t w = s->wait.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (s->version.load(std::memory_order_relaxed) != v1) continue;
      if (v1 != static_cast<uint32_t>(2 * (i / capacity_ + 1))) break;  // the slot holds a later call
      r.coll = static_cast<Collective>(kind & 0xff);
      r.dtype = static_cast<DataType>((kind >> 8) & 0xff);
      r.op = static_cast<RedOp>((kind >> 16) & 0xff);
      r.state = static_cast<TraceState>((kind >> kStateShift) & 0x3f);
      r.p2p = (kind & kP2pBit) != 0;
      if (r.p2p) {
        r.bytes = r.count;
        r.count = static_cast<uint32_t>(kind >> 32);
        r.root = -1;
      } else {
        r.root = static_cast<int32_t>(kind >> 32);
        r.bytes = r.count * dataTypeSize(r.dtype);
      }
      if (r.state == TraceState::Started) r.endTicks = 0;  // an end being written: not ended yet
      if (w != ~uint64_t{0}) {
        r.waitRound = static_cast<int32_t>(w & 0xffffffffu);
        r.waitPeer = static_cast<int32_t>(w >> 32);
      }
      copied = true;
    }
    if (copied) out.push_back(r);
  }
  return out;
}

std::string FlightRecorder::toJson(const std::string& reason, size_t maxEntries) const {
  const std::vector<TraceRecord> records = snapshot(maxEntries);
  const TickScale& scale = tickScale();
  const double rate = scale.nsPerTick();
  std::string j;
  j.reserve(256 + records.size() * 320);
  j += "{";
  appendField(j, "schema", "conflux.trace");
  appendField(j, "version", 1);
  appendField(j, "reason", reason);
  appendField(j, "written_ns", TickScale::wallNowNs());
  appendKey(j, "comm", true);
  j += "{";
  appendField(j, "id", id_.commId);
  appendField(j, "name", id_.name);
  appendField(j, "rank", id_.rank);
  appendField(j, "nranks", id_.nranks);
  appendField(j, "local_rank", id_.localRank);
  appendField(j, "local_size", id_.localSize);
  appendField(j, "node", id_.node);
  appendField(j, "nodes", id_.nodes);
  appendField(j, "host", id_.host);
  appendField(j, "pid", static_cast<int64_t>(getpid()));
  j += "}";
  appendKey(j, "error", true);
  {
    std::lock_guard<std::mutex> lock(errorMutex_);
    if (error_.isOk()) {
      j += "null";
    } else {
      j += "{";
      appendField(j, "code", codeLabel(error_.code()));
      appendField(j, "message", error_.message());
      appendField(j, "failed_rank", failedRank_);
      appendField(j, "time_ns", errorWallNs_);
      j += "}";
    }
  }
  appendKey(j, "calls_recorded", true);
  j += std::to_string(written_.load(std::memory_order_acquire));
  appendField(j, "capacity", static_cast<int64_t>(capacity_));
  appendKey(j, "entries", true);
  j += "[";
  for (const TraceRecord& r : records) {
    separate(j, true);
    j += "{";
    appendField(j, "seq", static_cast<int64_t>(r.seq));
    appendField(j, "kind", r.p2p ? "p2p" : "collective");
    appendField(j, "collective", r.p2p ? std::string_view("sendrecv") : collectiveName(r.coll));
    appendField(j, "count", static_cast<int64_t>(r.count));
    appendField(j, "bytes", static_cast<int64_t>(r.bytes));
    if (!r.p2p) {
      appendField(j, "dtype", dataTypeName(r.dtype));
      appendField(j, "op", redOpName(r.op));
      appendField(j, "root", r.root);
    }
    appendField(j, "algorithm", algorithmName(r.algorithm));
    appendField(j, "state", traceStateName(r.state));
    appendField(j, "queued_ns", scale.wallNs(r.queuedTicks, rate));
    appendField(j, "start_ns", scale.wallNs(r.startTicks, rate));
    if (r.endTicks != 0) {
      appendField(j, "end_ns", scale.wallNs(r.endTicks, rate));
      appendKey(j, "duration_us");
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.3f", TickScale::spanNs(r.startTicks, r.endTicks, rate) / 1e3);
      j += buf;
    }
    if (r.waitRound >= 0) {
      appendKey(j, "waited");
      j += "{";
      appendField(j, "round", r.waitRound + 1);
      appendField(j, "peer", r.waitPeer);
      j += "}";
    }
    j += "}";
  }
  j += "\n]}\n";
  return j;
}

bool FlightRecorder::dump(const std::string& reason) const {
  if (dir_.empty() || capacity_ == 0) return false;
  std::lock_guard<std::mutex> lock(dumpMutex_);
  const std::string text = toJson(reason);
  const std::string base = id_.commId + ".rank" + std::to_string(id_.rank) + ".json";
  const std::filesystem::path dir(dir_);
  const std::filesystem::path tmp = dir / ("." + base + ".tmp" + std::to_string(getpid()));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) {
      CFX_WARN(kInit, "flight recorder: cannot write %s", tmp.c_str());
      return false;
    }
  }
  std::filesystem::rename(tmp, dir / base, ec);
  if (ec) {
    CFX_WARN(kInit, "flight recorder: cannot rename %s: %s", tmp.c_str(), ec.message().c_str());
    std::filesystem::remove(tmp, ec);
    return false;
  }
  CFX_INFO(kInit, "flight recorder: %s (%s) written to %s", reason.c_str(), id_.commId.c_str(), (dir / base).c_str());
  return true;
}

void FlightRecorder::dumpAll(const std::string& reason) {
  std::lock_guard<std::mutex> lock(registryMutex());
  for (const FlightRecorder* r : registry()) r->dump(reason);
}

namespace {

int signalPipe[2] = {-1, -1};

void onTraceSignal(int) {
  const int saved = errno;
  const char byte = 1;
  [[maybe_unused]] ssize_t n = write(signalPipe[1], &byte, 1);  // async-signal-safe; a full pipe drops it
  errno = saved;
}

}  // namespace

void FlightRecorder::installSignalDump() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current {};
    if (sigaction(SIGUSR1, nullptr, &current) == 0 && current.sa_handler != SIG_DFL && current.sa_handler != SIG_IGN) {
      CFX_WARN(kInit, "CONFLUX_TRACE_SIGNAL: SIGUSR1 already has a handler; the flight recorder leaves it alone");
      return;
    }
    if (pipe2(signalPipe, O_CLOEXEC | O_NONBLOCK) != 0) {
      CFX_WARN(kInit, "CONFLUX_TRACE_SIGNAL: pipe: %s", std::strerror(errno));
      return;
    }
    // The reading end blocks: only the handler's end must never block.
    fcntl(signalPipe[0], F_SETFL, fcntl(signalPipe[0], F_GETFL) & ~O_NONBLOCK);
    std::thread([] {
      char buf[64];
      for (;;) {
        const ssize_t n = read(signalPipe[0], buf, sizeof buf);
        if (n > 0) dumpAll("signal");
        else if (n < 0 && errno != EINTR) return;
      }
    }).detach();
    struct sigaction sa {};
    sa.sa_handler = onTraceSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, nullptr);
  });
}

}  // namespace conflux
