/// @file conflux.hpp
/// The Conflux C++ API: an RAII communicator over the C API, std::span overloads that deduce the datatype,
/// asynchronous variants returning a Request, and exceptions that carry the cfxResult_t.
///
/// Calls on one Communicator run in the order they were issued, whether synchronous or asynchronous
/// (asynchronous ones run on a worker thread owned by the communicator), so every rank sees the same order.
#ifndef CONFLUX_CONFLUX_HPP
#define CONFLUX_CONFLUX_HPP

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "conflux/conflux.h"

namespace conflux {

/// An error from Conflux: the result code and the message (which names the argument or peer at fault).
class CFX_API Exception : public std::runtime_error {
 public:
  Exception(cfxResult_t result, const std::string& message) : std::runtime_error(message), result_(result) {}
  /// The C result code.
  cfxResult_t result() const noexcept { return result_; }

 private:
  cfxResult_t result_;
};

/// Throws Exception when @p r is not cfxSuccess, with the thread's last-error message.
inline void check(cfxResult_t r) {
  if (r != cfxSuccess) throw Exception(r, cfxGetLastError(nullptr));
}

/// IEEE binary16 storage type for spans of float16 data.
struct float16_t {
  uint16_t bits;
};
/// bfloat16 storage type for spans of bfloat16 data.
struct bfloat16_t {
  uint16_t bits;
};

/// The cfxDataType_t of element type T (compile error for unsupported types).
template <class T>
constexpr cfxDataType_t dataTypeOf() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, int8_t> || std::is_same_v<U, char>) return cfxInt8;
  else if constexpr (std::is_same_v<U, uint8_t>) return cfxUint8;
  else if constexpr (std::is_same_v<U, int32_t>) return cfxInt32;
  else if constexpr (std::is_same_v<U, uint32_t>) return cfxUint32;
  else if constexpr (std::is_same_v<U, int64_t>) return cfxInt64;
  else if constexpr (std::is_same_v<U, uint64_t>) return cfxUint64;
  else if constexpr (std::is_same_v<U, float16_t>) return cfxFloat16;
  else if constexpr (std::is_same_v<U, bfloat16_t>) return cfxBfloat16;
  else if constexpr (std::is_same_v<U, float>) return cfxFloat32;
  else if constexpr (std::is_same_v<U, double>) return cfxFloat64;
  else static_assert(sizeof(T) == 0, "unsupported element type");
}

/// A unique id: create it on one rank, send its bytes to the others.
class CFX_API UniqueId {
 public:
  /// Creates an id and starts the rendezvous store in this process.
  static UniqueId create();
  /// Rebuilds an id from bytes received from the creating rank.
  static UniqueId fromBytes(const std::array<char, CFX_UNIQUE_ID_BYTES>& bytes);
  /// The bytes to send to the other ranks.
  std::array<char, CFX_UNIQUE_ID_BYTES> bytes() const;
  /// The C id.
  const cfxUniqueId& raw() const { return id_; }

 private:
  cfxUniqueId id_{};
};

/// Per-communicator settings (cfxConfig_t): unset fields take the environment's values.
struct Config {
  /// Milliseconds a call waits for a stuck peer before failing with cfxTimeout; 0: CONFLUX_TIMEOUT_MS.
  int timeoutMs = 0;
  /// Shown in log lines and error messages; empty: none.
  std::string name;
  /// Split, group and shrink children only: send through the parent's network endpoints and take its measured
  /// costs (cfxConfig_t::splitShare); false opens endpoints of the child's own.
  bool splitShare = true;
};

/// The completion of an asynchronous call.
class CFX_API Request {
 public:
  Request();
  ~Request();
  Request(Request&&) noexcept;
  Request& operator=(Request&&) noexcept;
  /// Blocks until the call finished; throws Exception if it failed.
  void wait();
  /// True when the call has finished (wait() then returns or throws without blocking).
  bool test() const;

 private:
  friend class Communicator;
  struct State;
  explicit Request(std::shared_ptr<State> s);
  std::shared_ptr<State> state_;
};

/// A communicator (RAII: destroyed with its object). Move-only.
class CFX_API Communicator {
 public:
  /// Joins a communicator of @p nranks ranks as @p rank (collective; throws Exception).
  Communicator(int nranks, const UniqueId& id, int rank);
  /// Joins a communicator with per-communicator settings (collective; throws Exception).
  Communicator(int nranks, const UniqueId& id, int rank, const Config& config);
  /// Joins the communicator described by the launcher's environment (mpirun, srun, torchrun).
  static Communicator fromEnvironment();
  /// Splits this communicator (collective over it, as cfxCommSplit): ranks passing the same @p color form
  /// a new one, ranked by @p key; a negative color gets no communicator (an empty optional).
  std::optional<Communicator> split(int color, int key, const Config& config = {});
  /// Makes a communicator of the ranks @p ranks of this one, in that order (as cfxCommCreateGroup):
  /// called by those ranks only, each passing the same list.
  Communicator createGroup(std::span<const int> ranks, const Config& config = {});
  /// Makes a communicator of this one's ranks less @p excludeRanks, to carry on after they failed (as
  /// cfxCommShrink): called by every other rank, each passing the same ranks; works on a communicator
  /// that has failed. This one is left as it is.
  Communicator shrink(std::span<const int> excludeRanks, const Config& config = {});
  ~Communicator();
  Communicator(Communicator&&) noexcept;
  Communicator& operator=(Communicator&&) noexcept;

  /// This process's rank.
  int rank() const;
  /// Number of ranks.
  int size() const;
  /// Index among the ranks of this node.
  int localRank() const;
  /// Number of ranks on this node.
  int localSize() const;
  /// The C handle (owned by this object).
  cfxComm_t native() const;
  /// Aborts: blocked calls return with an error, peers see the failure. The object stays destroyable.
  void abort();

  /// recv = op over ranks of send (recv.size() >= send.size()).
  template <class T>
  void allReduce(std::span<const T> send, std::span<T> recv, cfxRedOp_t op = cfxSum) {
    need(recv.size() >= send.size(), "allReduce: recv is smaller than send");
    call(Kind::AllReduce, send.data(), recv.data(), send.size(), dataTypeOf<T>(), op, 0).wait();
  }
  /// In place: data = op over ranks of data.
  template <class T>
  void allReduce(std::span<T> data, cfxRedOp_t op = cfxSum) {
    call(Kind::AllReduce, data.data(), data.data(), data.size(), dataTypeOf<T>(), op, 0).wait();
  }
  /// Asynchronous all-reduce; the buffers must stay alive until the request completes.
  template <class T>
  Request allReduceAsync(std::span<const T> send, std::span<T> recv, cfxRedOp_t op = cfxSum) {
    need(recv.size() >= send.size(), "allReduceAsync: recv is smaller than send");
    return call(Kind::AllReduce, send.data(), recv.data(), send.size(), dataTypeOf<T>(), op, 0, true);
  }
  /// recv on @p root = op over ranks of send.
  template <class T>
  void reduce(std::span<const T> send, std::span<T> recv, int root, cfxRedOp_t op = cfxSum) {
    need(rank() != root || recv.size() >= send.size(), "reduce: recv is smaller than send on the root");
    call(Kind::Reduce, send.data(), recv.data(), send.size(), dataTypeOf<T>(), op, root).wait();
  }
  /// data on every rank = data on @p root.
  template <class T>
  void broadcast(std::span<T> data, int root) {
    call(Kind::Broadcast, data.data(), data.data(), data.size(), dataTypeOf<T>(), cfxSum, root).wait();
  }
  /// Asynchronous broadcast.
  template <class T>
  Request broadcastAsync(std::span<T> data, int root) {
    return call(Kind::Broadcast, data.data(), data.data(), data.size(), dataTypeOf<T>(), cfxSum, root, true);
  }
  /// recv (size() * send.size() elements) = every rank's send, in rank order.
  template <class T>
  void allGather(std::span<const T> send, std::span<T> recv) {
    need(recv.size() == send.size() * static_cast<size_t>(size()), "allGather: recv must hold size() * send.size()");
    call(Kind::AllGather, send.data(), recv.data(), send.size(), dataTypeOf<T>(), cfxSum, 0).wait();
  }
  /// Asynchronous all-gather.
  template <class T>
  Request allGatherAsync(std::span<const T> send, std::span<T> recv) {
    need(recv.size() == send.size() * static_cast<size_t>(size()), "allGatherAsync: recv must hold size() * send.size()");
    return call(Kind::AllGather, send.data(), recv.data(), send.size(), dataTypeOf<T>(), cfxSum, 0, true);
  }
  /// recv = op over ranks of this rank's block of send (send.size() == size() * recv.size()).
  template <class T>
  void reduceScatter(std::span<const T> send, std::span<T> recv, cfxRedOp_t op = cfxSum) {
    need(send.size() == recv.size() * static_cast<size_t>(size()), "reduceScatter: send must hold size() * recv.size()");
    call(Kind::ReduceScatter, send.data(), recv.data(), recv.size(), dataTypeOf<T>(), op, 0).wait();
  }
  /// Asynchronous reduce-scatter.
  template <class T>
  Request reduceScatterAsync(std::span<const T> send, std::span<T> recv, cfxRedOp_t op = cfxSum) {
    need(send.size() == recv.size() * static_cast<size_t>(size()), "reduceScatterAsync: send must hold size() * recv.size()");
    return call(Kind::ReduceScatter, send.data(), recv.data(), recv.size(), dataTypeOf<T>(), op, 0, true);
  }
  /// Block j of send goes to rank j; block i of recv comes from rank i (equal sizes, multiple of size()).
  template <class T>
  void allToAll(std::span<const T> send, std::span<T> recv) {
    need(send.size() == recv.size() && send.size() % static_cast<size_t>(size()) == 0,
         "allToAll: send and recv must have equal sizes divisible by size()");
    call(Kind::AllToAll, send.data(), recv.data(), send.size() / static_cast<size_t>(size()), dataTypeOf<T>(),
         cfxSum, 0).wait();
  }
  /// recv on @p root (size() * send.size() elements) = every rank's send, in rank order; other ranks' recv
  /// is unused (may be empty).
  template <class T>
  void gather(std::span<const T> send, std::span<T> recv, int root) {
    need(rank() != root || recv.size() == send.size() * static_cast<size_t>(size()),
         "gather: recv must hold size() * send.size() on the root");
    ordered([=](cfxComm_t c) { return cfxGather(send.data(), recv.data(), send.size(), dataTypeOf<T>(), root, c, nullptr); });
  }
  /// Block i of @p root's send (size() * recv.size() elements) lands in rank i's recv.
  template <class T>
  void scatter(std::span<const T> send, std::span<T> recv, int root) {
    need(rank() != root || send.size() == recv.size() * static_cast<size_t>(size()),
         "scatter: send must hold size() * recv.size() on the root");
    ordered([=](cfxComm_t c) { return cfxScatter(send.data(), recv.data(), recv.size(), dataTypeOf<T>(), root, c, nullptr); });
  }
  /// All-to-all with per-peer counts and displacements (elements; size() entries each), as cfxAllToAllv.
  template <class T>
  void allToAllv(std::span<const T> send, std::span<const size_t> sendCounts, std::span<const size_t> sendDispls,
                 std::span<T> recv, std::span<const size_t> recvCounts, std::span<const size_t> recvDispls) {
    const auto n = static_cast<size_t>(size());
    need(sendCounts.size() == n && sendDispls.size() == n && recvCounts.size() == n && recvDispls.size() == n,
         "allToAllv: counts and displacements need size() entries each");
    for (size_t q = 0; q < n; ++q) {
      need(sendDispls[q] + sendCounts[q] <= send.size(), "allToAllv: a send block lies outside send");
      need(recvDispls[q] + recvCounts[q] <= recv.size(), "allToAllv: a receive block lies outside recv");
    }
    ordered([=](cfxComm_t c) {
      return cfxAllToAllv(send.data(), sendCounts.data(), sendDispls.data(), recv.data(), recvCounts.data(),
                          recvDispls.data(), dataTypeOf<T>(), c, nullptr);
    });
  }
  /// Sends @p data to @p peer.
  template <class T>
  void send(std::span<const T> data, int peer) {
    call(Kind::Send, data.data(), nullptr, data.size(), dataTypeOf<T>(), cfxSum, peer).wait();
  }
  /// Receives @p data from @p peer.
  template <class T>
  void recv(std::span<T> data, int peer) {
    call(Kind::Recv, nullptr, data.data(), data.size(), dataTypeOf<T>(), cfxSum, peer).wait();
  }
  /// Sends @p out to @p peer and receives @p in from @p peer2 concurrently (no deadlock in rings).
  template <class T>
  void sendRecv(std::span<const T> out, int peer, std::span<T> in, int peer2) {
    sendRecvBytes(out.data(), out.size(), peer, in.data(), in.size(), peer2, dataTypeOf<T>());
  }

 private:
  enum class Kind { AllReduce, Reduce, Broadcast, AllGather, ReduceScatter, AllToAll, Send, Recv };
  static void need(bool ok, const char* what) {
    if (!ok) throw Exception(cfxInvalidArgument, what);
  }
  Request call(Kind kind, const void* send, void* recv, size_t count, cfxDataType_t type, cfxRedOp_t op,
               int rootOrPeer, bool async = false);
  void sendRecvBytes(const void* out, size_t outCount, int peer, void* in, size_t inCount, int peer2,
                     cfxDataType_t type);
  /// Runs @p fn on this communicator in issue order with the asynchronous calls; throws on failure.
  void ordered(const std::function<cfxResult_t(cfxComm_t)>& fn);
  /// Releases @p op after the calls issued before (asynchronous ones may still use it).
  void releaseOpInOrder(cfxRedOp_t op) noexcept;
  template <class T>
  friend class PreMulSum;
  struct Impl;
  explicit Communicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// A pre-multiplied sum on one communicator (cfxRedOpCreatePreMulSum, RAII): pass op() as the reduction;
/// each rank's input is multiplied by its own @p scalar before the sum. Use it with element type T only,
/// on the communicator it was made on, which must outlive it. The op is released after the calls issued
/// before the destructor (asynchronous ones included) have run.
template <class T>
class PreMulSum {
 public:
  PreMulSum(Communicator& comm, T scalar) : comm_(comm) {
    check(cfxRedOpCreatePreMulSum(&op_, &scalar, dataTypeOf<T>(), cfxScalarHostImmediate, comm.native()));
  }
  ~PreMulSum() { comm_.releaseOpInOrder(op_); }
  PreMulSum(const PreMulSum&) = delete;
  PreMulSum& operator=(const PreMulSum&) = delete;
  /// The op to pass to the collectives of the communicator it was made on.
  cfxRedOp_t op() const { return op_; }

 private:
  Communicator& comm_;
  cfxRedOp_t op_ = cfxSum;
};

}  // namespace conflux

#endif  // CONFLUX_CONFLUX_HPP
