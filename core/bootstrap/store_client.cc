// Client of the rendezvous store; see store_client.h and the protocol in wire.h.
#include "core/bootstrap/store_client.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "core/bootstrap/crypto.h"
#include "core/bootstrap/wire.h"
#include "core/error.h"
#include "core/log.h"

namespace conflux::bootstrap {
namespace {

using wire::Msg;

// Grace on top of a GET's wait time before the client gives up on the server itself.
constexpr std::chrono::milliseconds kReplyGrace{2000};

bool retryable(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == ECONNRESET || err == EHOSTUNREACH ||
         err == ENETUNREACH || err == EAGAIN || err == EADDRNOTAVAIL || err == ECONNABORTED;
}

void checkKey(const std::string& key) {
  if (key.size() > wire::kMaxKeyBytes) {
    throw Error(Code::InvalidArgument, "bootstrap: key '" + key.substr(0, 40) + "...' is " +
                                           std::to_string(key.size()) + " bytes, over the " +
                                           std::to_string(wire::kMaxKeyBytes) + "-byte limit");
  }
}

}  // namespace

StoreClient::StoreClient(const UniqueId& id, std::chrono::milliseconds timeout)
    : id_(id), peer_(describe(id)), timeout_(timeout) {
  std::memcpy(&addr_.storage, &id.addr, sizeof id.addr);
  addr_.len = id.addrLen;
  std::lock_guard<std::mutex> lock(mutex_);
  connect(Clock::now() + timeout_);
}

StoreClient::~StoreClient() = default;

void StoreClient::connect(Deadline deadline) {
  auto backoff = std::chrono::milliseconds(5);
  std::string lastWhy;
  for (;;) {
    Fd fd;
    int err = tryConnect(addr_, deadline, &fd);
    if (err == 0) {
      fd_ = std::move(fd);
      try {
        if (authenticate(deadline)) return;
        lastWhy = "the store closed the connection during authentication";
      } catch (const Error& e) {
        if (e.code() != Code::RemoteError && e.code() != Code::Timeout) throw;
        lastWhy = e.what();
      }
      fd_.reset();
    } else if (!retryable(err)) {
      throw Error(Code::SystemError, systemErrorMessage("bootstrap: cannot connect to store " + peer_, err));
    } else {
      lastWhy = strerror(err);
    }
    if (Clock::now() + backoff >= deadline) break;
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  }
  throw Error(Code::Timeout, "bootstrap: could not reach the store at " + peer_ + " within " +
                                 std::to_string(timeout_.count()) + " ms (" + lastWhy + ")");
}

bool StoreClient::authenticate(Deadline deadline) {
  Reply hello = readReply(deadline);
  if (hello.type != static_cast<uint8_t>(Msg::Hello) || hello.body.size() != 5 + wire::kNonceBytes ||
      wire::getU32(hello.body.data()) != wire::kMagic) {
    throw Error(Code::InvalidUsage, "bootstrap: " + peer_ + " is not a Conflux store (bad greeting)");
  }
  if (hello.body[4] != wire::kVersion) {
    throw Error(Code::InvalidUsage, "bootstrap: store " + peer_ + " speaks protocol version " +
                                        std::to_string(hello.body[4]) + ", this rank version " +
                                        std::to_string(wire::kVersion) + " (mixed Conflux releases?)");
  }
  const uint8_t* serverNonce = hello.body.data() + 5;
  std::vector<uint8_t> body = randomBytes(wire::kNonceBytes);
  std::vector<uint8_t> clientNonce = body;
  Digest proof = wire::clientProof(id_.secret, serverNonce, clientNonce.data());
  body.insert(body.end(), proof.begin(), proof.end());
  std::vector<uint8_t> f = wire::frame(Msg::Auth, body);
  sendAll(fd_.get(), f.data(), f.size(), deadline, "store " + peer_);
  Reply r;
  try {
    r = readReply(deadline);
  } catch (const Error& e) {
    if (e.code() == Code::RemoteError) return false;
    throw;
  }
  if (r.type == static_cast<uint8_t>(Msg::AuthFail)) {
    throw Error(Code::InvalidUsage, "bootstrap: the store at " + peer_ +
                                        " refused our credentials (ranks hold different unique ids or "
                                        "CONFLUX_SECRET values?)");
  }
  Digest expected = wire::serverProof(id_.secret, serverNonce, clientNonce.data());
  if (r.type != static_cast<uint8_t>(Msg::AuthOk) || r.body.size() != expected.size() ||
      !constantTimeEqual(r.body.data(), expected.data(), expected.size())) {
    throw Error(Code::InvalidUsage, "bootstrap: the store at " + peer_ +
                                        " failed to prove it knows the job secret; refusing to use it");
  }
  CFX_TRACE(kBootstrap, "bootstrap: connected to store %s", peer_.c_str());
  return true;
}

StoreClient::Reply StoreClient::readReply(Deadline deadline) {
  const std::string who = "store " + peer_;
  uint8_t header[wire::kHeaderBytes];
  recvAll(fd_.get(), header, sizeof header, deadline, who);
  size_t len = wire::getU32(header);
  if (len == 0 || len > 1 + wire::kMaxValueBytes) {
    throw Error(Code::RemoteError, "bootstrap: " + who + " sent a malformed reply (length " +
                                       std::to_string(len) + ")");
  }
  Reply r;
  recvAll(fd_.get(), &r.type, 1, deadline, who);
  r.body.resize(len - 1);
  recvAll(fd_.get(), r.body.data(), r.body.size(), deadline, who);
  return r;
}

StoreClient::Reply StoreClient::call(const std::vector<uint8_t>& head, const std::vector<uint8_t>* value,
                                     const std::string& key, Deadline replyDeadline) {
  Deadline deadline = Clock::now() + timeout_;
  if (!fd_.valid()) connect(deadline);
  try {
    sendAll(fd_.get(), head.data(), head.size(), deadline, "store " + peer_);
    if (value && !value->empty()) sendAll(fd_.get(), value->data(), value->size(), deadline, "store " + peer_);
    return readReply(std::max(deadline, replyDeadline));
  } catch (const Error& e) {
    fd_.reset();  // the stream is out of step now; the next call reconnects
    throw Error(e.code(), std::string(e.what()) + " (key '" + key + "')");
  }
}

void StoreClient::fail(const Reply& r, const std::string& key, const char* op) {
  if (r.type == static_cast<uint8_t>(Msg::Error)) {
    throw Error(Code::RemoteError, "bootstrap: store " + peer_ + " refused " + op + " of key '" + key +
                                       "': " + std::string(r.body.begin(), r.body.end()));
  }
  fd_.reset();
  throw Error(Code::RemoteError, "bootstrap: store " + peer_ + " sent an unexpected reply (type " +
                                     std::to_string(r.type) + ") to " + op + " of key '" + key + "'");
}

void StoreClient::set(const std::string& key, const std::vector<uint8_t>& value) {
  checkKey(key);
  if (value.size() > wire::kMaxValueBytes) {
    throw Error(Code::InvalidArgument, "bootstrap: value for key '" + key + "' is " +
                                           std::to_string(value.size()) + " bytes, over the " +
                                           std::to_string(wire::kMaxValueBytes) + "-byte limit");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  Reply r = call(wire::requestHead(Msg::Set, key, value.size()), &value, key, {});
  if (r.type != static_cast<uint8_t>(Msg::Ok)) fail(r, key, "set");
}

std::vector<uint8_t> StoreClient::get(const std::string& key) { return get(key, timeout_); }

std::vector<uint8_t> StoreClient::get(const std::string& key, std::chrono::milliseconds timeout) {
  checkKey(key);
  auto waitMs = std::clamp<int64_t>(timeout.count(), 0, UINT32_MAX);
  std::vector<uint8_t> head = wire::requestHead(Msg::Get, key, 4);
  wire::putU32(head, static_cast<uint32_t>(waitMs));
  std::lock_guard<std::mutex> lock(mutex_);
  Reply r = call(head, nullptr, key, Clock::now() + timeout + kReplyGrace);
  if (r.type == static_cast<uint8_t>(Msg::Value)) return std::move(r.body);
  if (r.type == static_cast<uint8_t>(Msg::Missing)) {
    throw Error(Code::Timeout, "bootstrap: timed out after " + std::to_string(timeout.count()) +
                                   " ms waiting for key '" + key + "' from " + peer_);
  }
  fail(r, key, "get");
}

int64_t StoreClient::add(const std::string& key, int64_t delta) {
  checkKey(key);
  std::vector<uint8_t> head = wire::requestHead(Msg::Add, key, 8);
  wire::putU64(head, static_cast<uint64_t>(delta));
  std::lock_guard<std::mutex> lock(mutex_);
  Reply r = call(head, nullptr, key, {});
  if (r.type != static_cast<uint8_t>(Msg::Int) || r.body.size() != 8) fail(r, key, "add");
  return static_cast<int64_t>(wire::getU64(r.body.data()));
}

bool StoreClient::check(const std::string& key) {
  checkKey(key);
  std::lock_guard<std::mutex> lock(mutex_);
  Reply r = call(wire::requestHead(Msg::Check, key, 0), nullptr, key, {});
  if (r.type != static_cast<uint8_t>(Msg::Bool) || r.body.size() != 1) fail(r, key, "check");
  return r.body[0] != 0;
}

bool StoreClient::remove(const std::string& key) {
  checkKey(key);
  std::lock_guard<std::mutex> lock(mutex_);
  Reply r = call(wire::requestHead(Msg::Delete, key, 0), nullptr, key, {});
  if (r.type != static_cast<uint8_t>(Msg::Bool) || r.body.size() != 1) fail(r, key, "delete");
  return r.body[0] != 0;
}

}  // namespace conflux::bootstrap
