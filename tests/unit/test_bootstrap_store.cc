// The rendezvous store: operations, blocking GET, deadlines, concurrency, limits, and clients that do not
// know the secret or misbehave (refused, logged, while the server keeps serving others).
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <thread>

#include "core/bootstrap/store_client.h"
#include "core/bootstrap/store_server.h"
#include "core/error.h"
#include "test_bootstrap_util.h"

using namespace cfxtest;

namespace {

class BootstrapStore : public ::testing::Test {
 protected:
  void SetUp() override { startServer(StoreServerOptions()); }
  void startServer(StoreServerOptions opts) {
    if (opts.handshakeTimeout == StoreServerOptions().handshakeTimeout) opts.handshakeTimeout = 300ms;
    server_.reset();
    server_ = StoreServer::start("127.0.0.1", 0, testSecret(1), opts);
    id_ = server_->uniqueId();
  }
  std::unique_ptr<StoreClient> client(std::chrono::milliseconds timeout = 5000ms) {
    return std::make_unique<StoreClient>(id_, timeout);
  }
  template <typename F>
  static Error expectError(F f) {
    try {
      f();
    } catch (const Error& e) {
      return e;
    }
    ADD_FAILURE() << "expected an Error";
    return Error(Code::Ok, "");
  }
  std::shared_ptr<StoreServer> server_;
  UniqueId id_;
  LogCapture logs_;
};

std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

}  // namespace

TEST_F(BootstrapStore, SetGetAddCheckRemove) {
  auto c = client();
  c->set("a", bytes("hello"));
  EXPECT_EQ(c->get("a"), bytes("hello"));
  c->set("a", bytes("again"));
  EXPECT_EQ(c->get("a"), bytes("again"));
  c->set("empty", {});
  EXPECT_TRUE(c->get("empty").empty());
  EXPECT_EQ(c->add("n", 5), 5);
  EXPECT_EQ(c->add("n", -7), -2);
  EXPECT_EQ(c->get("n"), bytes("-2"));
  EXPECT_TRUE(c->check("a"));
  EXPECT_FALSE(c->check("b"));
  EXPECT_TRUE(c->remove("a"));
  EXPECT_FALSE(c->remove("a"));
  EXPECT_FALSE(c->check("a"));
  Error e = expectError([&] { c->add("empty", 1); });
  EXPECT_EQ(e.code(), Code::RemoteError);
  EXPECT_NE(std::string(e.what()).find("not an integer"), std::string::npos) << e.what();
  EXPECT_EQ(server_->keyCount(), 2u);
}

TEST_F(BootstrapStore, LargestValueRoundTrips) {
  auto c = client();
  std::vector<uint8_t> big(wire::kMaxValueBytes);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 131);
  c->set(std::string(wire::kMaxKeyBytes, 'k'), big);
  EXPECT_EQ(c->get(std::string(wire::kMaxKeyBytes, 'k')), big);
}

TEST_F(BootstrapStore, GetWaitsForALaterSetFromAnotherClient) {
  auto waiter = client();
  auto setter = client();
  auto start = Clock::now();
  std::thread t([&] {
    std::this_thread::sleep_for(150ms);
    setter->set("late", bytes("x"));
  });
  EXPECT_EQ(waiter->get("late"), bytes("x"));
  EXPECT_GE(Clock::now() - start, 140ms);
  t.join();
}

TEST_F(BootstrapStore, GetTimesOutNamingKeyAndAddressThenKeepsWorking) {
  auto c = client();
  auto start = Clock::now();
  Error e = expectError([&] { c->get("rank/3", 200ms); });
  EXPECT_EQ(e.code(), Code::Timeout);
  EXPECT_GE(Clock::now() - start, 190ms);
  EXPECT_EQ(std::string(e.what()),
            "bootstrap: timed out after 200 ms waiting for key 'rank/3' from " + describe(id_));
  c->set("rank/3", bytes("ok"));
  EXPECT_EQ(c->get("rank/3"), bytes("ok"));
}

TEST_F(BootstrapStore, ClientRetriesUntilTheServerStarts) {
  uint16_t port = freePort();
  UniqueId id = id_;
  reinterpret_cast<sockaddr_in&>(id.addr).sin_port = htons(port);
  std::shared_ptr<StoreServer> late;
  std::thread t([&] {
    std::this_thread::sleep_for(200ms);
    late = StoreServer::start("127.0.0.1", port, testSecret(1));
  });
  StoreClient c(id, 5000ms);
  c.set("k", bytes("v"));
  EXPECT_EQ(c.get("k"), bytes("v"));
  t.join();
}

TEST_F(BootstrapStore, ConnectTimeoutNamesTheAddress) {
  UniqueId id = id_;
  // A port nobody can listen on meanwhile: with freePort's released port a store of a test running
  // beside this one (the same derived secret) once took it and answered (clean-clone CI, under ASan).
  const ReservedPort reserved = reservePort();
  ASSERT_NE(reserved.port, 0);
  const uint16_t port = reserved.port;
  reinterpret_cast<sockaddr_in&>(id.addr).sin_port = htons(port);
  Error e = expectError([&] { StoreClient c(id, 200ms); });
  EXPECT_EQ(e.code(), Code::Timeout);
  EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(port)), std::string::npos) << e.what();
}

// A loopback connect to a port nobody listens on yet can pick that port as its source and connect to
// itself (TCP simultaneous open); a store client retrying until its server starts would then wait for a
// greeting from itself until its deadline instead of retrying. tryConnect treats it as refused.
namespace {

/// The address a listening socket is bound to (its port picked by the kernel).
SockAddr boundAddress(const Fd& listener) {
  SockAddr a;
  a.len = sizeof a.storage;
  if (getsockname(listener.get(), reinterpret_cast<sockaddr*>(&a.storage), &a.len) != 0) {
    ADD_FAILURE() << "getsockname: " << std::strerror(errno);
  }
  return a;
}

}  // namespace

TEST(BootstrapSocket, ASocketConnectedToItselfIsRecognised) {
  Fd self(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(self.valid());
  SockAddr a = resolveAddress("127.0.0.1", 1);
  reinterpret_cast<sockaddr_in&>(a.storage).sin_port = 0;
  ASSERT_EQ(::bind(self.get(), reinterpret_cast<const sockaddr*>(&a.storage), a.len), 0);
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ASSERT_EQ(getsockname(self.get(), reinterpret_cast<sockaddr*>(&bound), &len), 0);
  ASSERT_EQ(::connect(self.get(), reinterpret_cast<const sockaddr*>(&bound), len), 0) << std::strerror(errno);
  EXPECT_TRUE(isSelfConnected(self.get()));
  // An ordinary connection is not.
  SockAddr l = resolveAddress("127.0.0.1", 1);
  reinterpret_cast<sockaddr_in&>(l.storage).sin_port = 0;
  Fd listener = listenOn(l, 1);
  const SockAddr target = boundAddress(listener);
  Fd out;
  ASSERT_EQ(tryConnect(target, Clock::now() + 2000ms, &out), 0);
  EXPECT_FALSE(isSelfConnected(out.get()));
}

TEST(BootstrapSocket, AConnectionLeavesFromTheSourceAddressGiven) {
  // Every 127.x address is this host's; the kernel would pick 127.0.0.1 unless told otherwise. A rank
  // with a NIC of its own binds its connections to that NIC's address, so that they leave by it.
  Fd listener = listenOn(resolveAddress("127.0.0.1", 0), 4);
  const SockAddr target = boundAddress(listener);
  for (const char* source : {"127.0.0.2", "127.0.0.3"}) {
    const SockAddr from = resolveAddress(source, 0);
    Fd out;
    ASSERT_EQ(tryConnect(target, Clock::now() + 2000ms, &out, &from), 0);
    sockaddr_in local{};
    socklen_t len = sizeof local;
    ASSERT_EQ(getsockname(out.get(), reinterpret_cast<sockaddr*>(&local), &len), 0);
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &local.sin_addr, text, sizeof text);
    EXPECT_STREQ(text, source);
  }
  // A source that is not this host's fails the bind, returned like a connect's error (unless the host
  // allows binding any address: net.ipv4.ip_nonlocal_bind).
  std::ifstream nonlocal("/proc/sys/net/ipv4/ip_nonlocal_bind");
  int allowed = 0;
  if (!(nonlocal >> allowed) || allowed == 0) {
    const SockAddr foreign = resolveAddress("192.0.2.1", 0);
    Fd out;
    EXPECT_EQ(tryConnect(target, Clock::now() + 2000ms, &out, &foreign), EADDRNOTAVAIL);
  }
}

TEST_F(BootstrapStore, ManyClientsConcurrently) {
  constexpr int kClients = 64;
  auto errors = runRanks(kClients, [&](int i) {
    StoreClient c(id_, 10000ms);
    c.set("k" + std::to_string(i), bytes("v" + std::to_string(i)));
    c.add("counter", 1);
    for (int peer : {(i + 1) % kClients, (i + 17) % kClients}) {
      if (c.get("k" + std::to_string(peer)) != bytes("v" + std::to_string(peer))) throw std::runtime_error("bad value");
    }
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  EXPECT_EQ(client()->add("counter", 0), kClients);
}

TEST_F(BootstrapStore, WrongSecretIsRefusedAndLogged) {
  UniqueId wrong = id_;
  wrong.secret[0] ^= 0xff;
  Error e = expectError([&] { StoreClient c(wrong, 2000ms); });
  EXPECT_EQ(e.code(), Code::InvalidUsage);
  EXPECT_NE(std::string(e.what()).find("refused"), std::string::npos) << e.what();
  EXPECT_TRUE(LogCapture::contains("authentication failed", "127.0.0.1:"));
  auto c = client();
  c->set("still", bytes("serving"));
  EXPECT_EQ(c->get("still"), bytes("serving"));
}

TEST_F(BootstrapStore, ClientRefusesAServerThatCannotProveTheSecret) {
  // A fake server: sends a valid greeting, then accepts any proof with a bogus one of its own.
  SockAddr any = resolveAddress("127.0.0.1", 1);
  reinterpret_cast<sockaddr_in&>(any.storage).sin_port = 0;
  Fd listener = listenOn(any, 4);
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  getsockname(listener.get(), reinterpret_cast<sockaddr*>(&ss), &len);
  std::thread fake([&] {
    pollfd p{listener.get(), POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 3000), 1);
    Fd conn(::accept(listener.get(), nullptr, nullptr));
    std::vector<uint8_t> hello;
    wire::putU32(hello, wire::kMagic);
    hello.push_back(wire::kVersion);
    hello.resize(hello.size() + 32, 7);
    auto f = wire::frame(wire::Msg::Hello, hello);
    sendAll(conn.get(), f.data(), f.size(), Clock::now() + 2s, "client");
    uint8_t auth[4 + 1 + 64];
    recvAll(conn.get(), auth, sizeof auth, Clock::now() + 2s, "client");
    auto ok = wire::frame(wire::Msg::AuthOk, std::vector<uint8_t>(32, 0));
    sendAll(conn.get(), ok.data(), ok.size(), Clock::now() + 2s, "client");
  });
  UniqueId id = id_;
  id.addr = ss;
  Error e = expectError([&] { StoreClient c(id, 2000ms); });
  EXPECT_EQ(e.code(), Code::InvalidUsage);
  EXPECT_NE(std::string(e.what()).find("failed to prove"), std::string::npos) << e.what();
  fake.join();
}

TEST_F(BootstrapStore, MisbehavingRawClientsAreDroppedWhileOthersAreServed) {
  StoreServerOptions opts;
  opts.handshakeTimeout = 1000ms;
  startServer(opts);
  RawClient silent(id_);  // says nothing at all
  RawClient garbage(id_);
  garbage.read();  // the greeting
  garbage.send(bytes("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  RawClient wrongType(id_);
  wrongType.read();
  wrongType.send(wire::frame(wire::Msg::Set, std::vector<uint8_t>(10, 1)));  // a request before authenticating
  RawClient huge(id_);
  huge.read();
  huge.send({0x7f, 0xff, 0xff, 0xff, 1});  // announces a 2 GiB frame before authenticating
  RawClient wrongMac(id_);
  EXPECT_EQ(wrongMac.authenticate(testSecret(9)), static_cast<uint8_t>(wire::Msg::AuthFail));

  // Meanwhile a real client is served at once, while the silent one still holds its connection.
  auto c = client();
  c->set("k", bytes("v"));
  EXPECT_EQ(c->get("k"), bytes("v"));
  EXPECT_FALSE(silent.closedByServer(0ms));

  EXPECT_TRUE(garbage.closedByServer(1000ms));
  EXPECT_TRUE(wrongType.closedByServer(1000ms));
  EXPECT_TRUE(huge.closedByServer(1000ms));
  EXPECT_TRUE(wrongMac.closedByServer(1000ms));
  EXPECT_TRUE(silent.closedByServer(3000ms));  // after the 1000 ms handshake timeout
  EXPECT_TRUE(LogCapture::contains("garbage", "127.0.0.1:")) << testing::PrintToString(LogCapture::lines());
  EXPECT_TRUE(LogCapture::contains("invalid frame length 1195725856", "127.0.0.1:"));  // "GET "
  EXPECT_TRUE(LogCapture::contains("invalid frame length 2147483647", "127.0.0.1:"));
  EXPECT_TRUE(LogCapture::contains("authentication failed", "127.0.0.1:"));
  EXPECT_TRUE(LogCapture::contains("silent for 1000 ms", "127.0.0.1:"));
  EXPECT_EQ(c->get("k"), bytes("v"));
}

// Found by tests/fuzz (fuzz_store_server): a client that goes away while its GET waits (a rank that
// died during bootstrap) kept its connection until the wait ran out, with the server's thread spinning
// on the end of stream meanwhile; enough of them filled the connection limit.
TEST_F(BootstrapStore, AClientGoneWhileItsGetWaitsIsDroppedAtOnce) {
  for (bool halfClose : {true, false}) {
    {
      RawClient raw(id_);
      ASSERT_EQ(raw.authenticate(testSecret(1)), static_cast<uint8_t>(wire::Msg::AuthOk));
      std::vector<uint8_t> get = wire::requestHead(wire::Msg::Get, "never-set", 4);
      wire::putU32(get, 60000);  // waits a minute for the key
      raw.send(get);
      std::this_thread::sleep_for(50ms);
      ASSERT_EQ(server_->connectionCount(), 1u);
      if (halfClose) ::shutdown(raw.fd(), SHUT_WR);
    }  // closed
    const auto until = std::chrono::steady_clock::now() + 2s;
    while (server_->connectionCount() > 0 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(10ms);
    EXPECT_EQ(server_->connectionCount(), 0u) << (halfClose ? "shut, then closed" : "closed");
  }
  auto c = client();
  c->set("never-set", bytes("now"));
  EXPECT_EQ(c->get("never-set"), bytes("now"));
}

TEST_F(BootstrapStore, OversizedKeysValuesAndFramesAreRejected) {
  auto c = client();
  Error e = expectError([&] { c->set(std::string(wire::kMaxKeyBytes + 1, 'k'), bytes("v")); });
  EXPECT_EQ(e.code(), Code::InvalidArgument);
  e = expectError([&] { c->set("k", std::vector<uint8_t>(wire::kMaxValueBytes + 1)); });
  EXPECT_EQ(e.code(), Code::InvalidArgument);
  EXPECT_NE(std::string(e.what()).find("'k'"), std::string::npos);

  // The server checks too: an authenticated raw client sending a long key gets an error reply...
  RawClient raw(id_);
  ASSERT_EQ(raw.authenticate(testSecret(1)), static_cast<uint8_t>(wire::Msg::AuthOk));
  std::string longKey(300, 'k');
  auto head = wire::requestHead(wire::Msg::Check, longKey, 0);
  raw.send(head);
  auto [type, body] = raw.read();
  EXPECT_EQ(type, static_cast<uint8_t>(wire::Msg::Error));
  EXPECT_NE(std::string(body.begin(), body.end()).find("256-byte limit"), std::string::npos);
  // ... and one announcing a frame beyond the limit is disconnected before anything is allocated.
  std::vector<uint8_t> header;
  wire::putU32(header, static_cast<uint32_t>(wire::kMaxFrame + 1));
  raw.send(header);
  EXPECT_TRUE(raw.closedByServer(1000ms));
  EXPECT_TRUE(LogCapture::contains("invalid frame length"));
  EXPECT_EQ(c->add("n", 1), 1);
}

TEST_F(BootstrapStore, StoredBytesAreCapped) {
  StoreServerOptions opts;
  opts.maxStoredBytes = 1000;
  startServer(opts);
  auto c = client();
  c->set("a", std::vector<uint8_t>(900));
  Error e = expectError([&] { c->set("b", std::vector<uint8_t>(200)); });
  EXPECT_EQ(e.code(), Code::RemoteError);
  EXPECT_NE(std::string(e.what()).find("store full"), std::string::npos) << e.what();
  c->set("a", std::vector<uint8_t>(500));  // replacing frees the old value's bytes
  c->set("b", std::vector<uint8_t>(200));
}

TEST_F(BootstrapStore, ConnectionsBeyondTheLimitAreRefused) {
  StoreServerOptions opts;
  opts.maxConnections = 3;
  startServer(opts);
  std::vector<std::unique_ptr<StoreClient>> clients;
  for (int i = 0; i < 3; ++i) clients.push_back(client());
  RawClient extra(id_);
  EXPECT_TRUE(extra.closedByServer(1000ms));
  EXPECT_TRUE(LogCapture::contains("already 3 connections"));
  clients.pop_back();
  auto again = client(3000ms);  // retries until the server has noticed the closed connection
  again->set("k", bytes("v"));
}
