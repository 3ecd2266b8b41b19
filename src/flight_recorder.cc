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

#include "core/log.h"
#include "core/ticks.h"

namespace conflux {

struct TraceCursor::Slot {
  std::atomic<uint32_t> version{0};  // odd while the call thread writes
  std::atomic<uint64_t> seq{0};
  std::atomic<uint64_t> kind{0};  // coll | dtype << 8 | op << 16 | state << 24 | p2p << 30 | root << 32
  std::atomic<uint64_t> count{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> algorithm{0};
  std::atomic<uint64_t> queued{0}, start{0}, end{0};
  std::atomic<uint64_t> wait{~uint64_t{0}};  // round (low 32 bits) | peer << 32, all ones: never waited

  // Single writer: the version goes odd, the fields change, the version goes even again.
  template <class F>
  void write(F&& f) {
    const uint32_t v = version.load(std::memory_order_relaxed);
    version.store(v + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    f();
    version.store(v + 2, std::memory_order_release);
  }
};

namespace {

constexpr uint64_t kStateShift = 24;
constexpr uint64_t kStateMask = uint64_t{0x3f} << kStateShift;
constexpr uint64_t kP2pBit = uint64_t{1} << 30;

uint64_t packKind(Collective coll, DataType dtype, RedOp op, TraceState state, bool p2p, int root) {
  return static_cast<uint64_t>(coll) | static_cast<uint64_t>(static_cast<uint8_t>(dtype)) << 8 |
         static_cast<uint64_t>(static_cast<uint8_t>(op)) << 16 | static_cast<uint64_t>(state) << kStateShift |
         (p2p ? kP2pBit : 0) | static_cast<uint64_t>(static_cast<uint32_t>(root)) << 32;
}

// One process-wide scale, made with the first recorder, so that a dump rates ticks over a long span.
const TickScale& tickScale() {
  static const TickScale scale;
  return scale;
}

std::mutex& registryMutex() {
  static auto* m = new std::mutex;  // never destroyed: recorders may outlive static destruction
  return *m;
}
std::vector<FlightRecorder*>& registry() {
  static auto* r = new std::vector<FlightRecorder*>;
  return *r;
}

void appendEscaped(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void appendField(std::string& out, const char* key, std::string_view value) {
  out += '"';
  out += key;
  out += "\":";
  appendEscaped(out, value);
}
void appendField(std::string& out, const char* key, int64_t value) {
  out += '"';
  out += key;
  out += "\":";
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

void TraceCursor::noteWait(int round, int peer) const {
  if (slot_ == nullptr) return;
  const uint64_t w = static_cast<uint32_t>(round) | static_cast<uint64_t>(static_cast<uint32_t>(peer)) << 32;
  if (slot_->wait.load(std::memory_order_relaxed) == w) return;  // the same wait again: nothing new
  slot_->write([&] { slot_->wait.store(w, std::memory_order_relaxed); });
}

FlightRecorder::FlightRecorder(TraceIdentity id, size_t entries, std::string dir)
    : id_(std::move(id)), dir_(std::move(dir)), capacity_(entries) {
  (void)tickScale();
  if (capacity_ > 0) slots_ = std::make_unique<TraceCursor::Slot[]>(capacity_);
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

TraceCursor::Slot* FlightRecorder::slotAt(uint64_t index) const { return &slots_[index % capacity_]; }

TraceCursor FlightRecorder::start(uint64_t seq, uint64_t packedKind, uint64_t count, uint64_t bytes,
                                  uint64_t queuedTicks, uint64_t startTicks) {
  TraceCursor c;
  if (capacity_ == 0) return c;
  const uint64_t index = written_.load(std::memory_order_relaxed);
  TraceCursor::Slot* s = slotAt(index);
  s->write([&] {
    s->seq.store(seq, std::memory_order_relaxed);
    s->kind.store(packedKind, std::memory_order_relaxed);
    s->count.store(count, std::memory_order_relaxed);
    s->bytes.store(bytes, std::memory_order_relaxed);
    s->algorithm.store(0, std::memory_order_relaxed);
    s->queued.store(queuedTicks, std::memory_order_relaxed);
    s->start.store(startTicks, std::memory_order_relaxed);
    s->end.store(0, std::memory_order_relaxed);
    s->wait.store(~uint64_t{0}, std::memory_order_relaxed);
  });
  written_.store(index + 1, std::memory_order_release);
  c.slot_ = s;
  return c;
}

TraceCursor FlightRecorder::begin(Collective coll, DataType dtype, RedOp op, int root, uint64_t count, uint64_t bytes,
                                  uint64_t queuedTicks, uint64_t startTicks) {
  return start(++collSeq_, packKind(coll, dtype, op, TraceState::Started, false, root), count, bytes, queuedTicks,
               startTicks);
}

TraceCursor FlightRecorder::beginP2p(uint64_t ops, uint64_t bytes, uint64_t queuedTicks, uint64_t startTicks) {
  return start(++p2pSeq_, packKind(Collective::SendRecv, DataType::Uint8, RedOp::Sum, TraceState::Started, true, -1),
               ops, bytes, queuedTicks, startTicks);
}

void FlightRecorder::setAlgorithm(const TraceCursor& c, uint32_t algorithm) {
  if (c.slot_ == nullptr || c.slot_->algorithm.load(std::memory_order_relaxed) == algorithm) return;
  c.slot_->write([&] { c.slot_->algorithm.store(algorithm, std::memory_order_relaxed); });
}

void FlightRecorder::end(const TraceCursor& c, bool ok) {
  if (c.slot_ == nullptr) return;
  TraceCursor::Slot* s = c.slot_;
  const uint64_t now = ticksNow();
  const TraceState state = ok ? TraceState::Completed : TraceState::Failed;
  s->write([&] {
    const uint64_t k = s->kind.load(std::memory_order_relaxed);
    s->kind.store((k & ~kStateMask) | static_cast<uint64_t>(state) << kStateShift, std::memory_order_relaxed);
    s->end.store(now, std::memory_order_relaxed);
  });
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
    const TraceCursor::Slot* s = slotAt(i);
    TraceRecord r;
    // A write overlapping the copy makes the versions differ (or odd): copy again. The writer is one
    // thread doing a few stores, so a handful of tries suffices; a slot rewritten meanwhile (the ring
    // wrapped) simply yields the newer call.
    for (int attempt = 0; attempt < 1000; ++attempt) {
      const uint32_t v1 = s->version.load(std::memory_order_acquire);
      if (v1 & 1u) {
        std::this_thread::yield();
        continue;
      }
      const uint64_t kind = s->kind.load(std::memory_order_relaxed);
      r.seq = s->seq.load(std::memory_order_relaxed);
      r.count = s->count.load(std::memory_order_relaxed);
      r.bytes = s->bytes.load(std::memory_order_relaxed);
      r.algorithm = static_cast<uint32_t>(s->algorithm.load(std::memory_order_relaxed));
      r.queuedTicks = s->queued.load(std::memory_order_relaxed);
      r.startTicks = s->start.load(std::memory_order_relaxed);
      r.endTicks = s->end.load(std::memory_order_relaxed);
      const uint64_t w = s->wait.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (s->version.load(std::memory_order_relaxed) != v1) continue;
      r.coll = static_cast<Collective>(kind & 0xff);
      r.dtype = static_cast<DataType>((kind >> 8) & 0xff);
      r.op = static_cast<RedOp>((kind >> 16) & 0xff);
      r.state = static_cast<TraceState>((kind >> kStateShift) & 0x3f);
      r.p2p = (kind & kP2pBit) != 0;
      r.root = static_cast<int32_t>(kind >> 32);
      if (w != ~uint64_t{0}) {
        r.waitRound = static_cast<int32_t>(w & 0xffffffffu);
        r.waitPeer = static_cast<int32_t>(w >> 32);
      }
      break;
    }
    out.push_back(r);
  }
  return out;
}

std::string FlightRecorder::toJson(const std::string& reason) const {
  const std::vector<TraceRecord> records = snapshot();
  const TickScale& scale = tickScale();
  std::string j;
  j.reserve(256 + records.size() * 320);
  j += "{\n";
  appendField(j, "schema", "conflux.trace");
  j += ",";
  appendField(j, "version", 1);
  j += ",";
  appendField(j, "reason", reason);
  j += ",";
  appendField(j, "written_ns", TickScale::wallNowNs());
  j += ",\n\"comm\":{";
  appendField(j, "id", id_.commId);
  j += ",";
  appendField(j, "name", id_.name);
  j += ",";
  appendField(j, "rank", id_.rank);
  j += ",";
  appendField(j, "nranks", id_.nranks);
  j += ",";
  appendField(j, "local_rank", id_.localRank);
  j += ",";
  appendField(j, "local_size", id_.localSize);
  j += ",";
  appendField(j, "node", id_.node);
  j += ",";
  appendField(j, "nodes", id_.nodes);
  j += ",";
  appendField(j, "host", id_.host);
  j += ",";
  appendField(j, "pid", static_cast<int64_t>(getpid()));
  j += "},\n\"error\":";
  {
    std::lock_guard<std::mutex> lock(errorMutex_);
    if (error_.isOk()) {
      j += "null";
    } else {
      j += "{";
      appendField(j, "code", codeLabel(error_.code()));
      j += ",";
      appendField(j, "message", error_.message());
      j += ",";
      appendField(j, "failed_rank", failedRank_);
      j += ",";
      appendField(j, "time_ns", errorWallNs_);
      j += "}";
    }
  }
  j += ",\n";
  appendField(j, "calls_recorded", static_cast<int64_t>(written_.load(std::memory_order_acquire)));
  j += ",";
  appendField(j, "capacity", static_cast<int64_t>(capacity_));
  j += ",\n\"entries\":[";
  for (size_t i = 0; i < records.size(); ++i) {
    const TraceRecord& r = records[i];
    j += i == 0 ? "\n{" : ",\n{";
    appendField(j, "seq", static_cast<int64_t>(r.seq));
    j += ",";
    appendField(j, "kind", r.p2p ? "p2p" : "collective");
    j += ",";
    appendField(j, "collective", r.p2p ? std::string_view("sendrecv") : collectiveName(r.coll));
    j += ",";
    appendField(j, "count", static_cast<int64_t>(r.count));
    j += ",";
    appendField(j, "bytes", static_cast<int64_t>(r.bytes));
    if (!r.p2p) {
      j += ",";
      appendField(j, "dtype", dataTypeName(r.dtype));
      j += ",";
      appendField(j, "op", redOpName(r.op));
      j += ",";
      appendField(j, "root", r.root);
    }
    j += ",";
    appendField(j, "algorithm", algorithmName(r.algorithm));
    j += ",";
    appendField(j, "state", traceStateName(r.state));
    j += ",";
    appendField(j, "queued_ns", scale.wallNs(r.queuedTicks));
    j += ",";
    appendField(j, "start_ns", scale.wallNs(r.startTicks));
    if (r.endTicks != 0) {
      j += ",";
      appendField(j, "end_ns", scale.wallNs(r.endTicks));
      j += ",\"duration_us\":";
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.3f", scale.spanNs(r.startTicks, r.endTicks) / 1e3);
      j += buf;
    }
    if (r.waitRound >= 0) {
      j += ",\"waited\":{";
      appendField(j, "round", r.waitRound + 1);
      j += ",";
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
