// What anyone who can reach a rank's rendezvous store may send it: the real StoreServer, in this
// process, on 127.0.0.1, fed each input over a fresh TCP connection.
//
// Input: byte 0 picks the mode; the rest is sent as is.
//   bit 0 = 0  a stranger: the bytes go out before any handshake (the server's Hello is read and
//              ignored), as from someone who does not know the job secret;
//   bit 0 = 1  an authenticated client: the harness completes the handshake with the secret first,
//              so the bytes reach the request parser.
// Then the connection's write side is shut and replies are read until the server closes or is quiet
// for 20 ms. Every 64 inputs a real StoreClient must still set and get a key: a server that crashed,
// hung or stopped accepting is a finding (abort), and so is a refused handshake with the right secret.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "core/bootstrap/crypto.h"
#include "core/bootstrap/socket.h"
#include "core/bootstrap/store_client.h"
#include "core/bootstrap/store_server.h"
#include "core/bootstrap/wire.h"
#include "core/error.h"
#include "tests/fuzz/fuzz_sockets.h"

using namespace conflux;
using namespace conflux::bootstrap;

namespace {

std::shared_ptr<StoreServer> g_server;
UniqueId g_id;

/// Reads the Hello and answers with a correct Auth; "" when the server accepted it, else what failed.
const char* authenticate(int fd) {
  uint8_t hello[wire::kHeaderBytes + 1 + 5 + wire::kNonceBytes];
  if (!fuzzsock::readExactly(fd, hello, sizeof hello, 2000)) return "no greeting within 2 s";
  const uint8_t* serverNonce = hello + wire::kHeaderBytes + 1 + 5;
  std::vector<uint8_t> body = randomBytes(wire::kNonceBytes);
  const Digest proof = wire::clientProof(g_id.secret, serverNonce, body.data());
  body.insert(body.end(), proof.begin(), proof.end());
  const std::vector<uint8_t> auth = wire::frame(wire::Msg::Auth, body);
  if (!fuzzsock::writeAll(fd, auth.data(), auth.size())) return "the authentication could not be sent";
  uint8_t ok[wire::kHeaderBytes + 1 + 32];
  if (!fuzzsock::readExactly(fd, ok, sizeof ok, 2000)) return "no answer to the authentication within 2 s";
  return ok[wire::kHeaderBytes] == uint8_t(wire::Msg::AuthOk) ? "" : "the authentication was refused";
}

void checkServerAlive() {
  try {
    // The fuzzed sets fill the store over a long run; a full store that says so is alive.
    StoreClient client(g_id, std::chrono::milliseconds(5000));
    client.set("fuzz-health", {1, 2, 3});
    if (client.get("fuzz-health") != std::vector<uint8_t>{1, 2, 3}) {
      std::fprintf(stderr, "store server: a key read back wrong\n");
      std::abort();
    }
    client.remove("fuzz-health");
  } catch (const Error& e) {
    if (e.code() == Code::RemoteError && std::strstr(e.what(), "full") != nullptr) return;
    std::fprintf(stderr, "store server: no longer serves a good client: %s\n", e.what());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  StoreServerOptions options;
  options.handshakeTimeout = std::chrono::milliseconds(2000);
  options.maxStoredBytes = size_t{64} << 20;
  std::array<uint8_t, 32> secret;
  const std::vector<uint8_t> random = randomBytes(secret.size());
  std::copy(random.begin(), random.end(), secret.begin());
  g_server = StoreServer::start("127.0.0.1", 0, secret, options);
  g_id = g_server->uniqueId();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static unsigned inputs = 0;
  int fd = fuzzsock::connectTo(g_id.addr, g_id.addrLen);
  if (fd < 0) {
    std::fprintf(stderr, "store server: cannot connect: %s\n", std::strerror(errno));
    std::abort();
  }
  if ((data[0] & 1) != 0) {
    if (const char* why = authenticate(fd); *why != '\0') {
      // Broken, or only unlucky? A second client, timed; a server that fails both is a finding. (Before
      // the harness carried on through EINTR and reset its connections, libFuzzer's SIGALRM and
      // TIME_WAIT made false findings here: docs/fuzzing.md.)
      const auto t0 = std::chrono::steady_clock::now();
      ::close(fd);
      fd = fuzzsock::connectTo(g_id.addr, g_id.addrLen);
      const char* second = fd < 0 ? "cannot connect" : authenticate(fd);
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      std::fprintf(stderr, "store server: a client that knows the secret failed: %s (%zu connections open); a "
                   "second one %s after %.0f ms\n", why, g_server->connectionCount(),
                   *second == '\0' ? "succeeded" : second, ms);
      if (*second != '\0') std::abort();
    }
  }
  fuzzsock::writeAll(fd, data + 1, size - 1);
  ::shutdown(fd, SHUT_WR);
  fuzzsock::drain(fd, 20);
  ::close(fd);
  if (++inputs % 64 == 0) checkServerAlive();
  return 0;
}
