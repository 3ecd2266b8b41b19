#include "core/log.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "core/config.h"

namespace conflux::log {
namespace {

struct State {
  std::atomic<int> level{-1};  // -1: not loaded yet
  std::atomic<uint32_t> mask{kAll};
  std::atomic<Sink> sink{nullptr};
  std::mutex mutex;
  FILE* file = nullptr;
};

State& state() {
  static State s;
  return s;
}

thread_local int tlsRank = -1;

Level parseLevel(const std::string& s) {
  if (s == "NONE") return Level::None;
  if (s == "VERSION") return Level::Version;
  if (s == "INFO") return Level::Info;
  if (s == "TRACE") return Level::Trace;
  return Level::Warn;
}

uint32_t parseSubsys(const std::string& spec) {
  static const struct { const char* name; uint32_t bit; } kNames[] = {
      {"INIT", kInit}, {"COLL", kColl}, {"P2P", kP2p}, {"SHM", kShm}, {"BOOTSTRAP", kBootstrap},
      {"NET", kNet}, {"TUNING", kTuning}, {"ALL", kAll}};
  bool invert = !spec.empty() && spec[0] == '^';
  uint32_t mask = 0;
  size_t pos = invert ? 1 : 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    std::string tok = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    for (const auto& n : kNames) {
      if (strcasecmp(tok.c_str(), n.name) == 0) mask |= n.bit;
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return invert ? ~mask : mask;
}

std::string expandPath(std::string path) {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  for (size_t i; (i = path.find("%h")) != std::string::npos;) path.replace(i, 2, host);
  for (size_t i; (i = path.find("%p")) != std::string::npos;) path.replace(i, 2, std::to_string(getpid()));
  return path;
}

void load() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.mask.store(parseSubsys(config::getString(config::Var::DEBUG_SUBSYS)));
  std::string file = config::getString(config::Var::DEBUG_FILE);
  if (!file.empty() && s.file == nullptr) s.file = std::fopen(expandPath(file).c_str(), "w");
  s.level.store(static_cast<int>(parseLevel(config::getString(config::Var::DEBUG))));
}

const char* levelName(Level l) {
  switch (l) {
    case Level::Version: return "VERSION";
    case Level::Warn: return "WARN";
    case Level::Info: return "INFO";
    case Level::Trace: return "TRACE";
    default: return "";
  }
}

}  // namespace

bool enabled(Level level, uint32_t subsys) {
  State& s = state();
  int current = s.level.load(std::memory_order_relaxed);
  if (current < 0) {
    load();
    current = s.level.load();
  }
  return static_cast<int>(level) <= current && (s.mask.load(std::memory_order_relaxed) & subsys) != 0;
}

void vwrite(Level level, uint32_t subsys, const char* fmt, va_list args) {
  char message[2048];
  vsnprintf(message, sizeof message, fmt, args);
  State& s = state();
  if (Sink sink = s.sink.load()) {
    sink(level, subsys, message);
    return;
  }
  static char host[64] = {0};
  if (host[0] == '\0') gethostname(host, sizeof host - 1);
  char rank[24] = "";
  if (tlsRank >= 0) snprintf(rank, sizeof rank, " [%d]", tlsRank);
  std::lock_guard<std::mutex> lock(s.mutex);
  FILE* out = s.file ? s.file : stderr;
  fprintf(out, "%s:%d:%ld%s CONFLUX %s %s\n", host, static_cast<int>(getpid()),
          static_cast<long>(syscall(SYS_gettid)), rank, levelName(level), message);
  fflush(out);
}

void write(Level level, uint32_t subsys, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  vwrite(level, subsys, fmt, args);
  va_end(args);
}

void setThreadRank(int rank) { tlsRank = rank; }
void setSink(Sink sink) { state().sink.store(sink); }
void reloadConfig() { load(); }
void setLevel(Level level) {
  if (state().level.load() < 0) load();  // the subsystem mask and file still come from the environment
  state().level.store(static_cast<int>(level));
}

}  // namespace conflux::log
