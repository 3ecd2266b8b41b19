// What a rank's store client does with whatever a server (or something pretending to be one) answers:
// a real StoreClient connects to a fake server in this process, on 127.0.0.1, that sends the input.
//
// Input: byte 0 picks the mode; the rest is what the fake server sends.
//   bit 0 = 0  an impostor: the bytes are the whole conversation, Hello included;
//   bit 0 = 1  a server that knows the secret: the fake server completes a correct handshake, then
//              sends the bytes as the replies to the client's requests.
// The fake server then shuts its write side and drains; later connections in the same input (the
// client reconnects after a broken reply) are closed at once. Each input has a listening socket of its
// own, so an input is replayed exactly as it ran. The client runs set, get, add, check and
// remove until the first error, each call bounded by a 20 ms timeout.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

/// The fake server of one input: its own listening socket (so that no connection left over from an
/// earlier input meets this input's script) and a thread that plays the script to the first connection
/// and closes any later one, until stop().
class FakeServer {
 public:
  FakeServer(const std::array<uint8_t, 32>& secret, const uint8_t* data, size_t size)
      : script_(data, data + size) {
    listen_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (listen_ < 0 || ::bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listen_, 16) != 0 ||
        ::getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      std::perror("fake store: listen");
      std::abort();
    }
    std::memcpy(&id_.addr, &a, sizeof a);
    id_.addrLen = sizeof a;
    id_.secret = secret;
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeServer() {
    stop_.store(true);
    thread_.join();
    ::close(listen_);  // connections still in its backlog are reset
  }
  const UniqueId& id() const { return id_; }

 private:
  void serve() {
    bool first = true;
    while (!stop_.load()) {
      if (!fuzzsock::readable(listen_, 5)) continue;
      const int fd = ::accept4(listen_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      if (first) play(fd);
      first = false;
      ::close(fd);
    }
  }

  void play(int fd) {
    if ((script_[0] & 1) != 0 && !handshake(fd)) return;
    fuzzsock::writeAll(fd, script_.data() + 1, script_.size() - 1);
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

  std::vector<uint8_t> script_;
  int listen_ = -1;
  UniqueId id_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

std::array<uint8_t, 32> g_secret;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::vector<uint8_t> random = randomBytes(g_secret.size());
  std::copy(random.begin(), random.end(), g_secret.begin());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  FakeServer server(g_secret, data, size);
  try {
    StoreClient client(server.id(), std::chrono::milliseconds(20));
    client.set("key", {1, 2, 3});
    (void)client.get("key");
    (void)client.add("counter", 5);
    (void)client.check("key");
    (void)client.remove("key");
  } catch (const Error&) {
    // Refusing a bad server with an Error is the right answer; anything else is a finding.
  }
  return 0;
}
