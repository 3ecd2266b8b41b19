// What tests of the metrics endpoints share: free ports for a test process, a bounded HTTP GET on
// loopback, and the exposition's samples by name and labels.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace conflux::metricstest {

/// True when nothing listens on, or is bound to, any of 127.0.0.1:[base, base + n).
inline bool portsFree(int base, int n) {
  for (int p = base; p < base + n; ++p) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(p));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool ok = fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    if (fd >= 0) close(fd);
    if (!ok) return false;
  }
  return true;
}

/// 16 free ports for this test process (ranks add their local rank; tests offsets below 16), below
/// Linux's ephemeral range (32768 up), where other tests' connections take their local ports.
inline int basePort() {
  static const int port = [] {
    for (int attempt = 0; attempt < 400; ++attempt) {
      const int base = 20000 + static_cast<int>((getpid() + attempt * 7919) % 760) * 16;
      if (portsFree(base, 16)) return base;
    }
    return 20000;
  }();
  return port;
}

/// The body of an HTTP response ("" when there is none).
inline std::string bodyOf(const std::string& response) {
  const size_t at = response.find("\r\n\r\n");
  return at == std::string::npos ? std::string() : response.substr(at + 4);
}

/// GET `path` from 127.0.0.1:port: the whole response (headers and body), "" when it cannot connect.
inline std::string httpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return {};
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval limit{10, 0};  // a server that stops answering fails the test instead of hanging it
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const std::string req = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[65536];
      for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  return out;
}

/// The whole of a text file (a metrics textfile), or nullopt when it cannot be read.
inline std::optional<std::string> fileText(const std::string& path) {
  std::ifstream in(path);
  if (!in.good()) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Samples of the exposition: "name{labels}" -> value (labels as written).
inline std::map<std::string, double> samples(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    out[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return out;
}

/// The value of the one sample of `name` whose labels contain every `parts` (0 and a failure if none).
inline double value(const std::map<std::string, double>& s, const std::string& name, const std::vector<std::string>& parts) {
  const double* found = nullptr;
  for (const auto& [key, v] : s) {
    if (key.compare(0, name.size() + 1, name + "{") != 0) continue;
    bool all = true;
    for (const auto& p : parts) all = all && key.find(p) != std::string::npos;
    if (!all) continue;
    EXPECT_EQ(found, nullptr) << "two samples of " << name << " match";
    found = &v;
  }
  EXPECT_NE(found, nullptr) << "no sample of " << name << " with the given labels";
  return found != nullptr ? *found : 0;
}

}  // namespace conflux::metricstest
