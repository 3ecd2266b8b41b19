// conflux-status: the live view of a running job. Asks every rank's GET /status (CONFLUX_METRICS_ADDR:
// each process serves it on PORT + its local rank) for its communicators' last calls, and says per
// communicator what conflux-trace says of dumps: the last call every rank completed, where each rank
// is, who waits for whom, and the rank that is behind (docs/observability.md).
//
//   conflux-status [--json] [--timeout-ms N] HOST:PORT[-LAST] [...]
//
// HOST:9400-9407 asks ports 9400 to 9407 of HOST (the 8 local ranks of a node). Exit status: 0 when
// every target answered, 1 when some did not (what the others said is still printed), 2 on usage errors.
#include <civetweb.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tools/trace/trace_analysis.h"

namespace {

struct Target {
  std::string host;
  int port = 0;
};

bool parseTargets(const std::string& text, std::vector<Target>& out) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  std::string host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string ports = text.substr(colon + 1);
  char* end = nullptr;
  const long first = std::strtol(ports.c_str(), &end, 10);
  long last = first;
  if (*end == '-') last = std::strtol(end + 1, &end, 10);
  if (*end != '\0' || first < 1 || last < first || last > 65535 || last - first > 1024) return false;
  for (long p = first; p <= last; ++p) out.push_back({host, static_cast<int>(p)});
  return true;
}

/// The body of GET /status from `t`, or "" with `error` set.
std::string fetchStatus(const Target& t, int timeoutMs, std::string& error) {
  char ebuf[256] = "";
  mg_connection* conn = mg_connect_client(t.host.c_str(), t.port, 0, ebuf, sizeof ebuf);
  if (conn == nullptr) {
    error = ebuf[0] != '\0' ? ebuf : "cannot connect";
    return {};
  }
  mg_printf(conn, "GET /status HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", t.host.c_str());
  std::string body;
  if (mg_get_response(conn, ebuf, sizeof ebuf, timeoutMs) < 0) {
    error = ebuf[0] != '\0' ? ebuf : "no response";
  } else if (const mg_response_info* info = mg_get_response_info(conn); info == nullptr || info->status_code != 200) {
    error = "HTTP status " + std::to_string(info != nullptr ? info->status_code : 0);
  } else {
    char buf[16384];
    for (int n; (n = mg_read(conn, buf, sizeof buf)) > 0;) body.append(buf, static_cast<size_t>(n));
  }
  mg_close_connection(conn);
  return body;
}

int usage(FILE* f) {
  std::fprintf(f, "usage: conflux-status [--json] [--timeout-ms N] HOST:PORT[-LAST] [...]\n"
                  "Asks each rank's /status (CONFLUX_METRICS_ADDR) and names the rank that is behind.\n");
  return f == stdout ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  bool json = false;
  int timeoutMs = 5000;
  std::vector<Target> targets;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json") {
      json = true;
    } else if (a == "--timeout-ms" && i + 1 < argc) {
      timeoutMs = std::atoi(argv[++i]);
      if (timeoutMs < 1) return usage(stderr);
    } else if (a == "-h" || a == "--help") {
      return usage(stdout);
    } else if (a[0] == '-' || !parseTargets(a, targets)) {
      std::fprintf(stderr, "conflux-status: '%s' is not HOST:PORT or HOST:PORT-LAST\n", a.c_str());
      return usage(stderr);
    }
  }
  if (targets.empty()) return usage(stderr);
  mg_init_library(0);
  std::vector<conflux::trace::RankDump> dumps;
  int failures = 0;
  for (const Target& t : targets) {
    const std::string where = t.host + ":" + std::to_string(t.port);
    std::string error;
    const std::string body = fetchStatus(t, timeoutMs, error);
    try {
      if (body.empty()) throw std::runtime_error(error);
      const nlohmann::json doc = nlohmann::json::parse(body);
      if (doc.value("schema", "") != "conflux.status") throw std::runtime_error("not a conflux.status document");
      for (const auto& source : doc.at("sources")) dumps.push_back(conflux::trace::parseDump(source, where));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "conflux-status: %s: %s\n", where.c_str(), e.what());
      ++failures;
    }
  }
  mg_exit_library();
  if (dumps.empty()) {
    std::fprintf(stderr, "conflux-status: no communicator answered\n");
    return 1;
  }
  std::printf("%s", conflux::trace::render(conflux::trace::analyze(dumps), json).c_str());
  return failures == 0 ? 0 : 1;
}
