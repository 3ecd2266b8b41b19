// Helpers shared by the bootstrap unit tests: log capture, raw protocol clients and a fake environment.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <netinet/in.h>

#include <array>
#include <cerrno>
#include <thread>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/bootstrap/crypto.h"
#include "core/bootstrap/launcher_env.h"
#include "core/bootstrap/socket.h"
#include "core/bootstrap/unique_id.h"
#include "core/bootstrap/wire.h"
#include "core/log.h"

namespace cfxtest {

using namespace conflux;
using namespace conflux::bootstrap;
using namespace std::chrono_literals;

/// Collects log lines while alive (the sink is process-wide).
class LogCapture {
 public:
  LogCapture() { log::setSink(&LogCapture::sink); clear(); }
  ~LogCapture() { log::setSink(nullptr); }
  static std::vector<std::string> lines() {
    std::lock_guard<std::mutex> lock(mutex());
    return store();
  }
  static bool contains(const std::string& a, const std::string& b = "") {
    for (const auto& l : lines()) {
      if (l.find(a) != std::string::npos && l.find(b) != std::string::npos) return true;
    }
    return false;
  }
  static void clear() {
    std::lock_guard<std::mutex> lock(mutex());
    store().clear();
  }

 private:
  static std::mutex& mutex() { static std::mutex m; return m; }
  static std::vector<std::string>& store() { static std::vector<std::string> s; return s; }
  static void sink(log::Level, uint32_t, const char* message) {
    std::lock_guard<std::mutex> lock(mutex());
    store().push_back(message);
  }
};

inline std::array<uint8_t, 32> testSecret(uint8_t seed) {
  std::array<uint8_t, 32> s;
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>(seed + 7 * i);
  return s;
}

/// A hand-driven protocol client for poking the server with misbehaviour.
class RawClient {
 public:
  explicit RawClient(const UniqueId& id) {
    SockAddr a;
    a.storage = id.addr;
    a.len = id.addrLen;
    EXPECT_EQ(tryConnect(a, Clock::now() + 2s, &fd_), 0);
  }
  int fd() const { return fd_.get(); }
  void send(const std::vector<uint8_t>& bytes) {
    sendAll(fd_.get(), bytes.data(), bytes.size(), Clock::now() + 2s, "server");
  }
  /// Reads one frame: {type, body}.
  std::pair<uint8_t, std::vector<uint8_t>> read() {
    uint8_t h[4];
    recvAll(fd_.get(), h, 4, Clock::now() + 3s, "server");
    std::vector<uint8_t> body(wire::getU32(h));
    recvAll(fd_.get(), body.data(), body.size(), Clock::now() + 3s, "server");
    uint8_t type = body.at(0);
    body.erase(body.begin());
    return {type, body};
  }
  /// Completes the handshake with @p secret; returns the reply type (AuthOk or AuthFail).
  uint8_t authenticate(const std::array<uint8_t, 32>& secret) {
    auto [type, hello] = read();
    EXPECT_EQ(type, static_cast<uint8_t>(wire::Msg::Hello));
    std::vector<uint8_t> nc(32, 0x42);
    Digest proof = wire::clientProof(secret, hello.data() + 5, nc.data());
    nc.insert(nc.end(), proof.begin(), proof.end());
    send(wire::frame(wire::Msg::Auth, nc));
    return read().first;
  }
  /// True when the server closed the connection within @p timeout (any pending data is skipped).
  bool closedByServer(std::chrono::milliseconds timeout) {
    Deadline d = Clock::now() + timeout;
    char buf[4096];
    for (;;) {
      pollfd p{fd_.get(), POLLIN, 0};
      if (::poll(&p, 1, pollTimeoutMs(d)) <= 0) return false;
      ssize_t n = ::recv(fd_.get(), buf, sizeof buf, 0);
      if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
    }
  }

 private:
  Fd fd_;
};

/// A fake launcher environment.
class FakeEnv {
 public:
  FakeEnv(std::initializer_list<std::pair<const std::string, std::string>> vars) : vars_(vars) {}
  FakeEnv& set(const std::string& k, const std::string& v) { vars_[k] = v; return *this; }
  EnvLookup lookup() const {
    return [this](const char* name) -> const char* {
      auto it = vars_.find(name);
      return it == vars_.end() ? nullptr : it->second.c_str();
    };
  }

 private:
  std::map<std::string, std::string> vars_;
};

/// An unused TCP port on 127.0.0.1 (bound and released; tiny race, fine for tests).
inline uint16_t freePort() {
  SockAddr a = resolveAddress("127.0.0.1", 1);
  reinterpret_cast<sockaddr_in&>(a.storage).sin_port = 0;
  Fd fd = listenOn(a, 1);
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len);
  return ntohs(reinterpret_cast<sockaddr_in&>(ss).sin_port);
}

/// A TCP port on 127.0.0.1 that stays bound (without SO_REUSEADDR) and never listens while this lives:
/// connects to it are refused, and no other socket, of this process or a test running beside it, can
/// take the port (freePort's released port can be, and a parallel test's store then answered).
struct ReservedPort {
  Fd fd;
  uint16_t port = 0;
};
inline ReservedPort reservePort() {
  ReservedPort r;
  r.fd = Fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  SockAddr a = resolveAddress("127.0.0.1", 1);
  reinterpret_cast<sockaddr_in&>(a.storage).sin_port = 0;
  if (!r.fd.valid() || ::bind(r.fd.get(), reinterpret_cast<const sockaddr*>(&a.storage), a.len) != 0) return r;
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  getsockname(r.fd.get(), reinterpret_cast<sockaddr*>(&ss), &len);
  r.port = ntohs(reinterpret_cast<sockaddr_in&>(ss).sin_port);
  return r;
}

/// Runs f(rank) on n threads and rethrows nothing: returns each rank's error text ("" = success).
template <typename F>
std::vector<std::string> runRanks(int n, F f) {
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        f(r);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace cfxtest
