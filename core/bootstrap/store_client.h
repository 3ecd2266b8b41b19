// Client of the rendezvous store (store_server.h): connects to the address in a UniqueId, retrying
// until its deadline because the root may start a little later, authenticates both ways, and then
// offers set/get/add/check/remove, each bounded by a deadline. Errors name the store's address and key.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/bootstrap/socket.h"
#include "core/bootstrap/unique_id.h"

namespace conflux::bootstrap {

/// A connection to the rendezvous store. Thread-safe (calls are serialised).
class StoreClient {
 public:
  /// Connects and authenticates within @p timeout, which is also the default deadline of each call.
  /// Throws Error(Timeout) when the store cannot be reached in time, Error(InvalidUsage) when the store
  /// refuses our secret or cannot prove it knows it.
  StoreClient(const UniqueId& id, std::chrono::milliseconds timeout);
  ~StoreClient();
  StoreClient(const StoreClient&) = delete;
  StoreClient& operator=(const StoreClient&) = delete;

  /// Stores @p value under @p key (replacing any value). Throws Error(InvalidArgument) when the key is
  /// over 256 bytes or the value over 4 MiB, Error(RemoteError) when the store refuses it (full).
  void set(const std::string& key, const std::vector<uint8_t>& value);
  /// Waits until @p key exists and returns its value; Error(Timeout) after the default timeout.
  std::vector<uint8_t> get(const std::string& key);
  /// As get(key), with its own @p timeout.
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout);
  /// Atomically adds @p delta to the integer under @p key (0 when absent) and returns the new value.
  int64_t add(const std::string& key, int64_t delta);
  /// True when @p key exists (does not wait).
  bool check(const std::string& key);
  /// Removes @p key; true when it existed.
  bool remove(const std::string& key);

  /// The default per-call timeout.
  std::chrono::milliseconds timeout() const { return timeout_; }
  /// "ip:port" of the store.
  const std::string& address() const { return peer_; }

 private:
  struct Reply {
    uint8_t type;
    std::vector<uint8_t> body;
  };
  void connect(Deadline deadline);
  bool authenticate(Deadline deadline);  // false: the connection dropped (retry)
  Reply call(const std::vector<uint8_t>& head, const std::vector<uint8_t>* value, const std::string& key,
             Deadline replyDeadline);
  Reply readReply(Deadline deadline);
  [[noreturn]] void fail(const Reply& r, const std::string& key, const char* op);

  UniqueId id_;
  SockAddr addr_;
  std::string peer_;
  std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  Fd fd_;  // invalid after a failure mid-call: the next call reconnects
};

}  // namespace conflux::bootstrap
