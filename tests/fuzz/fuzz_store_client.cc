// What a rank's store client does with whatever a server (or something pretending to be one) answers:
// a real StoreClient connects to a fake server in this process, on 127.0.0.1, that sends the input.
//
// Input: byte 0 picks the mode; the rest is what the fake server sends.
//   bit 0 = 0  an impostor: the bytes are the whole conversation, Hello included;
//   bit 0 = 1  a server that knows the secret: the fake server completes a correct handshake, then
//              sends the bytes as the replies to the client's requests.
// The fake server then shuts its write side and drains; later connections in the same input (the
// client reconnects after a broken reply) are closed at once. The client runs set, get, add, check and
// remove until the first error, each call bounded by a 20 ms timeout.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "core/bootstrap/crypto.h"
#include "core/bootstrap/socket.h"
#include "core/bootstrap/store_client.h"
#include "core/bootstrap/wire.h"
#include "core/error.h"
#include "tests/fuzz/fuzz_sockets.h"

using namespace conflux;
using namespace conflux::bootstrap;

namespace {

/// The fake server: one listening socket for the whole run, one script per input.
class FakeServer {
 public:
  FakeServer() {
    listen_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (listen_ < 0 || ::bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listen_, 64) != 0 ||
        ::getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      std::perror("fake store: listen");
      std::abort();
    }
    std::memcpy(&id_.addr, &a, sizeof a);
    id_.addrLen = sizeof a;
    const std::vector<uint8_t> random = randomBytes(id_.secret.size());
    std::copy(random.begin(), random.end(), id_.secret.begin());
    std::thread([this] { serve(); }).detach();  // for the life of the fuzzing process
  }
  const UniqueId& id() const { return id_; }

  /// Arms the script for the next connections; done() ends it.
  void begin(const uint8_t* data, size_t size) {
    std::lock_guard<std::mutex> lock(mutex_);
    script_.assign(data, data + size);
    first_ = true;
  }
  void done() {
    std::lock_guard<std::mutex> lock(mutex_);
    script_.clear();
  }

 private:
  void serve() {
    for (;;) {
      const int fd = ::accept4(listen_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      std::vector<uint8_t> script;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (first_) script = script_;
        first_ = false;
      }
      if (!script.empty()) play(fd, script);
      ::close(fd);
    }
  }

  void play(int fd, const std::vector<uint8_t>& script) {
    if ((script[0] & 1) != 0 && !handshake(fd)) return;
    fuzzsock::writeAll(fd, script.data() + 1, script.size() - 1);
    ::shutdown(fd, SHUT_WR);
    fuzzsock::drain(fd, 50);
  }

  bool handshake(int fd) {
    std::vector<uint8_t> hello;
    wire::putU32(hello, wire::kMagic);
    hello.push_back(wire::kVersion);
    const std::vector<uint8_t> nonce = randomBytes(wire::kNonceBytes);
    hello.insert(hello.end(), nonce.begin(), nonce.end());
    const std::vector<uint8_t> f = wire::frame(wire::Msg::Hello, hello);
    if (!fuzzsock::writeAll(fd, f.data(), f.size())) return false;
    uint8_t auth[wire::kHeaderBytes + 1 + 2 * wire::kNonceBytes];
    if (!fuzzsock::readExactly(fd, auth, sizeof auth, 1000)) return false;
    const Digest proof = wire::serverProof(id_.secret, nonce.data(), auth + wire::kHeaderBytes + 1);
    const std::vector<uint8_t> ok = wire::frame(wire::Msg::AuthOk, std::vector<uint8_t>(proof.begin(), proof.end()));
    return fuzzsock::writeAll(fd, ok.data(), ok.size());
  }

  int listen_ = -1;
  UniqueId id_;
  std::mutex mutex_;
  std::vector<uint8_t> script_;
  bool first_ = false;
};

FakeServer* g_server = nullptr;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_server = new FakeServer();  // never destroyed: its thread runs until the process ends
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  g_server->begin(data, size);
  try {
    StoreClient client(g_server->id(), std::chrono::milliseconds(20));
    client.set("key", {1, 2, 3});
    (void)client.get("key");
    (void)client.add("counter", 5);
    (void)client.check("key");
    (void)client.remove("key");
  } catch (const Error&) {
    // Refusing a bad server with an Error is the right answer; anything else is a finding.
  }
  g_server->done();
  return 0;
}
