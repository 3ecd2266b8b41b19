// The metrics service: the registry of sources, the HTTP server (civetweb, Debian's libcivetweb: two
// handlers, /metrics and /status, bound to the configured host only) and the textfile writer.
//
// Why civetweb directly and not prometheus-cpp's Exposer (which wraps the same server): the Exposer
// answers "Content-Type: text/plain; charset=utf-8" without the exposition format's version, and it
// serves registered collectables only, so /status could not sit beside /metrics. prometheus-cpp still
// provides the data model and the text serializer (core/metrics/sink.cc).
#include "core/metrics/service.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "core/config.h"
#include "core/error.h"
#include "core/json_string.h"
#include "core/log.h"
#include "core/metrics/process_hub.h"

#if CONFLUX_HAVE_METRICS
#include <civetweb.h>
#endif

namespace conflux::metrics {
namespace {

// Process-wide state. Leaked on purpose: sources and the server threads may outlive static destruction,
// and a forked child starts from a fresh one (the parent's threads do not exist there).
struct State {
  std::mutex mutex;  // sources, identity; held while a scrape reads the sources
  std::vector<const Source*> sources;
  Identity identity;
  bool started = false;
  bool on = false;
  std::string httpAddress;
  std::string filePath;  // expanded; "" : no file output
  int intervalMs = 10000;
  std::mutex fileMutex;  // one writer of the file at a time
  // The copy that serves (core/metrics/process_hub.h): hub::local() when this one does, null before
  // start. Set once.
  std::atomic<const cfx_metrics_hub_v1*> owner{nullptr};
  std::vector<cfx_metrics_peer_v1> peers;  // the other copies attached to this one (the owner's only)
#if CONFLUX_HAVE_METRICS
  mg_context* http = nullptr;
  std::string httpError;  // civetweb's message when it cannot start
#endif
};

State* g_state = nullptr;
std::once_flag g_atfork;

State& state() {
  std::call_once(g_atfork, [] {
    pthread_atfork(nullptr, nullptr, [] { g_state = new State; });
  });
  static State* first = (g_state = new State);
  (void)first;
  return *g_state;
}

Labels identityLabels(const Identity& id) {
  Labels l;
  if (!id.jobId.empty()) l.emplace_back("job_id", id.jobId);
  if (id.rank >= 0) l.emplace_back("rank", std::to_string(id.rank));
  if (id.localRank >= 0) l.emplace_back("local_rank", std::to_string(id.localRank));
  if (!id.host.empty()) l.emplace_back("host", id.host);
  return l;
}

std::string expositionLocked(State& st) {
  Sink sink;
  sink.setCommonLabels(identityLabels(st.identity));
  sink.gauge("conflux_build_info", "Conflux's version and build options (always 1)",
             {{"version", CONFLUX_VERSION_STRING},
              {"cuda", CONFLUX_BUILD_CUDA ? "yes" : "no"},
              {"ofi", CONFLUX_BUILD_OFI ? "yes" : "no"}},
             1);
  for (const Source* s : st.sources) s->collect(sink);
  cfx_metrics_sink_v1 table = sink.table();
  for (const cfx_metrics_peer_v1& peer : st.peers) peer.collect(peer.ctx, &table);
  return sink.text();
}

bool writeFileLocked(State& st, const std::string& text) {
  // The temporary name does not end in .prom: node_exporter's textfile collector skips it.
  const std::string tmp = st.filePath + ".tmp." + std::to_string(::getpid());
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) {
    CFX_WARN(kInit, "CONFLUX_METRICS_FILE: cannot write %s: %s", tmp.c_str(), std::strerror(errno));
    return false;
  }
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok || std::rename(tmp.c_str(), st.filePath.c_str()) != 0) {
    CFX_WARN(kInit, "CONFLUX_METRICS_FILE: cannot write %s: %s", st.filePath.c_str(), std::strerror(errno));
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

// Never throws (it runs in the writer thread and in destructors): a failure is a warning.
bool writeFile(State& st) noexcept {
  if (st.filePath.empty()) return false;
  try {
    // Built and written under one lock (fileMutex, then the sources' mutex: nothing takes them the
    // other way round), so an older text never replaces a newer one.
    std::lock_guard<std::mutex> file(st.fileMutex);
    std::string text;
    {
      std::lock_guard<std::mutex> lock(st.mutex);
      text = expositionLocked(st);
    }
    return writeFileLocked(st, text);
  } catch (const std::exception& e) {
    CFX_WARN(kInit, "CONFLUX_METRICS_FILE: not written: %s", e.what());
    return false;
  }
}

void fileLoop(State* st) {
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(st->intervalMs));
    writeFile(*st);
  }
}

}  // namespace

HttpAddress parseHttpAddress(const std::string& text) {
  const auto bad = [&](const std::string& why) {
    return Error(Code::InvalidArgument, "CONFLUX_METRICS_ADDR='" + text + "' " + why + " (expected HOST:PORT, "
                                        "such as 127.0.0.1:9400 or [::1]:9400)");
  };
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) throw bad("has no port");
  if (colon == 0) throw bad("has no host");
  // civetweb reads commas as a list of listeners: one host only, as the variable promises.
  if (text.find_first_of(", \t") != std::string::npos) throw bad("is not one address");
  HttpAddress a;
  a.host = text.substr(0, colon);
  const std::string port = text.substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) {
    throw bad("has no port number");
  }
  a.port = std::atoi(port.c_str());
  if (a.port < 1 || a.port > 65535) throw bad("has a port out of range");
  if (a.host.front() == '[' && a.host.back() != ']') throw bad("has an unclosed [");
  if (a.host.find(':') != std::string::npos && a.host.front() != '[') throw bad("has an IPv6 host without []");
  return a;
}

namespace {

#if CONFLUX_HAVE_METRICS
int answer(mg_connection* conn, const char* contentType, const std::string& body) {
  const mg_request_info* req = mg_get_request_info(conn);
  const bool head = req != nullptr && std::strcmp(req->request_method, "HEAD") == 0;
  if (req == nullptr || (!head && std::strcmp(req->request_method, "GET") != 0)) {
    mg_printf(conn, "HTTP/1.1 405 Method Not Allowed\r\nAllow: GET, HEAD\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    return 405;
  }
  mg_printf(conn, "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %zu\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
            contentType, body.size());
  if (!head) mg_write(conn, body.data(), body.size());
  return 200;
}

// Handlers run on civetweb's threads, under C frames: nothing may unwind out of them.
template <class Body>
int answerOrFail(mg_connection* conn, const char* contentType, const Body& body) noexcept {
  try {
    return answer(conn, contentType, body());
  } catch (const std::exception& e) {
    mg_printf(conn, "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    CFX_WARN(kInit, "metrics: a request failed: %s", e.what());
    return 500;
  }
}

int metricsHandler(mg_connection* conn, void*) {
  return answerOrFail(conn, "text/plain; version=0.0.4; charset=utf-8", [] { return exposition(); });
}

int statusHandler(mg_connection* conn, void*) {
  return answerOrFail(conn, "application/json", [] { return statusJson(); });
}

// True on the thread inside mg_start: its messages say why the server cannot start.
thread_local bool t_starting = false;

// civetweb's messages: while starting, kept for the warning start() prints (start() holds st.mutex);
// later ones (its worker threads' errors) are logged as they come.
int logMessage(const mg_connection*, const char* message) {
  if (t_starting) {
    State& st = state();
    if (st.httpError.empty()) st.httpError = message;
  } else {
    CFX_WARN(kInit, "metrics: http server: %s", message);
  }
  return 1;  // handled: civetweb prints nothing itself
}

// Serves on PORT + local rank; with the local rank unknown (a process no launcher variable describes),
// on the first free port of PORT .. PORT + 63, so that the processes of one node do not all fight for
// PORT.
void startHttp(State& st, const HttpAddress& a) {
  static std::once_flag init;
  std::call_once(init, [] { mg_init_library(0); });
  const bool known = st.identity.localRank >= 0;
  const int first = a.port + std::max(0, st.identity.localRank);
  const int last = known ? first : std::min(65535, a.port + 63);
  if (first > 65535) {
    CFX_WARN(kInit, "CONFLUX_METRICS_ADDR: port %d + local rank %d is beyond 65535: no /metrics", a.port,
             st.identity.localRank);
    return;
  }
  mg_callbacks callbacks{};
  callbacks.log_message = logMessage;
  std::string listen;
  for (int port = first; port <= last && st.http == nullptr; ++port) {
    listen = a.host + ":" + std::to_string(port);
    const char* options[] = {"listening_ports", listen.c_str(), "num_threads", "2", "request_timeout_ms", "10000",
                             "enable_keep_alive", "no", nullptr};
    st.httpError.clear();
    t_starting = true;
    st.http = mg_start(&callbacks, nullptr, options);
    t_starting = false;
  }
  if (st.http == nullptr) {
    CFX_WARN(kInit, "CONFLUX_METRICS_ADDR: cannot serve metrics on %s%s (%s); the job runs without them",
             known ? "" : (a.host + ":" + std::to_string(first) + " .. ").c_str(), listen.c_str(),
             st.httpError.empty() ? "no reason given" : st.httpError.c_str());
    return;
  }
  mg_set_request_handler(st.http, "/metrics$", metricsHandler, nullptr);
  mg_set_request_handler(st.http, "/status$", statusHandler, nullptr);
  st.httpAddress = listen;
  CFX_INFO(kInit, "metrics: serving http://%s/metrics and /status%s", listen.c_str(),
           known ? "" : " (the local rank is unknown: the first free port from CONFLUX_METRICS_ADDR's)");
}
#endif

// ---- This copy's service (what the owner runs) ----

// Starts this copy's service unless it started already (the first identity stays); returns whether
// metrics are on. Throws for a malformed CONFLUX_METRICS_ADDR, before anything starts.
bool startLocal(State& st, const Identity& identity) {
  std::lock_guard<std::mutex> lock(st.mutex);
  if (st.started) {
    // A later starter that knows the rank (a communicator, after an NCCL plugin that did not) names it
    // in the labels from now on; the port and the file stay.
    if (st.identity.rank < 0 && identity.rank >= 0) st.identity.rank = identity.rank;
    if (st.identity.localRank < 0 && identity.localRank >= 0) st.identity.localRank = identity.localRank;
    return st.on;
  }
  const std::string addr = config::getString(config::Var::METRICS_ADDR);
  const std::string file = config::getString(config::Var::METRICS_FILE);
  const HttpAddress parsed = addr.empty() ? HttpAddress{} : parseHttpAddress(addr);  // throws before anything starts
  st.started = true;
  st.on = true;
  st.owner.store(hub::local());
  st.identity = identity;
  if (st.identity.jobId.empty()) st.identity.jobId = jobIdFromEnvironment();
  st.intervalMs = static_cast<int>(std::clamp<int64_t>(config::getInt(config::Var::METRICS_INTERVAL_MS), 100, 3600000));
#if CONFLUX_HAVE_METRICS
  if (!addr.empty()) startHttp(st, parsed);
#endif
  if (!file.empty()) {
    st.filePath = expandPath(file, identity.rank, identity.host);
    if (identity.rank < 0 && file.find("%r") != std::string::npos) {
      CFX_WARN(kInit, "CONFLUX_METRICS_FILE: this process's rank is unknown (no launcher variable gives it): %%r "
               "is its pid, %s", st.filePath.c_str());
    }
    std::thread(fileLoop, &st).detach();  // lives as long as the process (the state is never freed)
  }
  if (!hub::pinThisCopy()) {  // the server's and the writer's threads run this copy's code
    CFX_WARN(kInit, "metrics: this library could not be kept loaded; unloading it (dlclose) would end the process");
  }
  return true;
}

std::string statusJsonLocal(State& st) {
  std::lock_guard<std::mutex> lock(st.mutex);
  std::string out = "{\"schema\":\"conflux.status\",\"version\":1,\"host\":";
  appendJsonString(out, st.identity.host);
  out += ",\"job_id\":";
  appendJsonString(out, st.identity.jobId);
  out += ",\"rank\":" + std::to_string(st.identity.rank) + ",\"local_rank\":" + std::to_string(st.identity.localRank);
  out += ",\"pid\":" + std::to_string(::getpid()) + ",\"sources\":[";
  struct Parts {
    std::string* out;
    bool first = true;
  } parts{&out};
  const auto addPart = [](void* p, const char* text, size_t bytes) {
    auto* ps = static_cast<Parts*>(p);
    if (bytes == 0) return;
    if (!ps->first) *ps->out += ",\n";
    ps->first = false;
    ps->out->append(text, bytes);
  };
  for (const Source* s : st.sources) {
    const std::string part = s->status();
    addPart(&parts, part.data(), part.size());
  }
  for (const cfx_metrics_peer_v1& peer : st.peers) peer.status(peer.ctx, addPart, &parts);
  out += "]}\n";
  return out;
}

void appendToString(void* out, const char* text, size_t bytes) { static_cast<std::string*>(out)->append(text, bytes); }

// ---- The hub: how other copies reach this one (C frames above: nothing unwinds out) ----

int hubStart(int rank, int localRank, const char* host, const char* jobId, cfx_metrics_append_v1 error,
             void* out) noexcept {
  try {
    if (!requested()) return 0;
    return startLocal(state(), Identity{rank, localRank, host != nullptr ? host : "", jobId != nullptr ? jobId : ""}) ? 1 : 0;
  } catch (const std::exception& e) {
    error(out, e.what(), std::strlen(e.what()));  // the caller's append: it may not throw either
    return -1;
  } catch (...) {
    return -1;
  }
}

void hubAttach(const cfx_metrics_peer_v1* peer) noexcept {
  if (peer == nullptr || peer->size < hub::kPeerV1Bytes) return;  // not a table this version can read
  try {
    State& st = state();
    std::lock_guard<std::mutex> lock(st.mutex);
    st.peers.push_back(*peer);
  } catch (...) {
    // Out of memory: that copy's metrics are left out (nothing is logged: logging may allocate).
  }
}

int hubWriteFile() noexcept { return writeFile(state()) ? 1 : 0; }

template <class Text>
void hubAnswer(cfx_metrics_append_v1 append, void* out, const Text& text) noexcept {
  try {
    const std::string t = text();
    append(out, t.data(), t.size());
  } catch (...) {
    // Out of memory: the other copy gets an empty answer.
  }
}

void hubExposition(cfx_metrics_append_v1 append, void* out) noexcept {
  hubAnswer(append, out, [] {
    State& st = state();
    std::lock_guard<std::mutex> lock(st.mutex);
    return expositionLocked(st);
  });
}

void hubStatusJson(cfx_metrics_append_v1 append, void* out) noexcept {
  hubAnswer(append, out, [] { return statusJsonLocal(state()); });
}

void hubHttpAddress(cfx_metrics_append_v1 append, void* out) noexcept {
  hubAnswer(append, out, [] {
    State& st = state();
    std::lock_guard<std::mutex> lock(st.mutex);
    return st.httpAddress;
  });
}

constexpr cfx_metrics_hub_v1 kHub = {sizeof(cfx_metrics_hub_v1), hubStart, hubAttach, hubWriteFile,
                                     hubExposition, hubStatusJson, hubHttpAddress};

// ---- This copy as a peer of another copy that serves ----

void peerCollect(void*, const cfx_metrics_sink_v1* sink) noexcept {
  try {
    State& st = state();
    std::lock_guard<std::mutex> lock(st.mutex);
    Sink forward(sink);
    for (const Source* s : st.sources) s->collect(forward);
  } catch (...) {
    // Out of memory while scraping: this copy's samples are left out of this scrape.
  }
}

void peerStatus(void*, cfx_metrics_append_v1 part, void* out) noexcept {
  try {
    State& st = state();
    std::lock_guard<std::mutex> lock(st.mutex);
    for (const Source* s : st.sources) {
      const std::string json = s->status();
      part(out, json.data(), json.size());
    }
  } catch (...) {
  }
}

constexpr cfx_metrics_peer_v1 kPeer = {sizeof(cfx_metrics_peer_v1), nullptr, peerCollect, peerStatus};

/// The copy that serves, when it is not this one (null before start and when this one serves).
const cfx_metrics_hub_v1* remoteOwner() {
  const cfx_metrics_hub_v1* owner = state().owner.load();
  return owner != nullptr && owner != &kHub ? owner : nullptr;
}

std::string ask(void (*fn)(cfx_metrics_append_v1, void*)) {
  std::string out;
  fn(appendToString, &out);
  return out;
}

}  // namespace

namespace hub {
const cfx_metrics_hub_v1* local() { return &kHub; }
}  // namespace hub

std::string jobIdFromEnvironment() {
  static const char* const kVars[] = {"CONFLUX_JOB_ID", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "PMIX_NAMESPACE",
                                      "OMPI_MCA_ess_base_jobid"};
  for (const char* name : kVars) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') continue;
    if (std::strcmp(name, "TORCHELASTIC_RUN_ID") == 0 && std::strcmp(v, "none") == 0) continue;
    return v;
  }
  return {};
}

std::string expandPath(const std::string& pattern, int rank, const std::string& host) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    const char c = pattern[++i];
    if (c == 'r') out += rank >= 0 ? std::to_string(rank) : "pid" + std::to_string(::getpid());
    else if (c == 'h') out += host;
    else if (c == '%') out += '%';
    else {
      out += '%';
      out += c;
    }
  }
  return out;
}

bool requested() {
  const bool asked = !config::getString(config::Var::METRICS_ADDR).empty() ||
                     !config::getString(config::Var::METRICS_FILE).empty();
#if !CONFLUX_HAVE_METRICS
  if (asked) {
    static std::once_flag once;
    std::call_once(once, [] {
      CFX_WARN(kInit, "CONFLUX_METRICS_ADDR/CONFLUX_METRICS_FILE are set, but this build of Conflux has no "
                      "metrics (it was built without prometheus-cpp and civetweb)");
    });
  }
  return false;
#else
  return asked;
#endif
}

bool start(const Identity& identity) {
  if (!requested()) return false;
  State& st = state();
  {
    std::lock_guard<std::mutex> lock(st.mutex);
    if (st.started) return st.on;
  }
  const cfx_metrics_hub_v1* owner = hub::findOwner();  // outside the lock: it calls dlopen
  if (owner == &kHub) return startLocal(st, identity);
  // Another copy serves: it starts with this identity unless it started already, and reads this
  // copy's sources from now on.
  std::string error;
  const int rc = owner->start(identity.rank, identity.localRank, identity.host.c_str(), identity.jobId.c_str(),
                              appendToString, &error);
  if (rc < 0) throw Error(Code::InvalidArgument, error);
  {
    std::lock_guard<std::mutex> lock(st.mutex);
    if (st.started) return st.on;  // another thread of this copy got here first and attached
    st.started = true;
    st.on = rc == 1;
    if (st.on) st.owner.store(owner);
  }
  if (rc == 1) {
    // The owner calls into this copy at every scrape: only a copy that stays loaded may attach.
    if (!hub::pinThisCopy()) {
      CFX_WARN(kInit, "metrics: this library could not be kept loaded; its metrics are left out");
    } else {
      owner->attach(&kPeer);  // not under this copy's lock: the owner's scrape takes it after its own
      CFX_INFO(kInit, "metrics: served by another copy of Conflux in this process");
    }
  }
  return rc == 1;
}

std::string httpAddress() {
  if (const cfx_metrics_hub_v1* owner = remoteOwner()) return ask(owner->http_address);
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  return st.httpAddress;
}

void addSource(const Source* source) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  st.sources.push_back(source);
}

void removeSource(const Source* source) noexcept {
  State& st = state();
  // The source's final values (a no-op without file output); never throws.
  if (const cfx_metrics_hub_v1* owner = remoteOwner()) owner->write_file();
  else writeFile(st);
  std::lock_guard<std::mutex> lock(st.mutex);
  st.sources.erase(std::remove(st.sources.begin(), st.sources.end(), source), st.sources.end());
}

std::string exposition() {
  if (const cfx_metrics_hub_v1* owner = remoteOwner()) return ask(owner->exposition);
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mutex);
  return expositionLocked(st);
}

std::string statusJson() {
  if (const cfx_metrics_hub_v1* owner = remoteOwner()) return ask(owner->status_json);
  return statusJsonLocal(state());
}

bool writeFileNow() {
  if (const cfx_metrics_hub_v1* owner = remoteOwner()) return owner->write_file() == 1;
  return writeFile(state());
}

}  // namespace conflux::metrics
