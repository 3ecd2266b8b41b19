// An in-memory transport::LocalGroup for tests: the members of one simulated node are threads of one
// process sharing a FakeNode. It keeps the interface's contract as shared memory implements it
// (single-producer single-consumer byte streams whose readable spans stop at the buffer's end; a barrier
// by generations whose completing member rings the others; a doorbell that writes, reads and posted
// errors ring; liveness and call descriptors that ring nobody; an error slot per member where the first
// poster wins) and adds, under a seed, what a busy machine does to the caller's schedule:
//   - short writes: a write accepts a random 1..maxPiece bytes (granules kept whole), so that a message
//     wraps the stream's small buffer many times and the receiver reduces it in odd pieces;
//   - stalls: a write or a read finds nothing to do one time in `stallOneIn`, as when the peer is
//     descheduled, so that progress order varies from run to run (a stall rings the caller's own
//     doorbell, since nobody else will: the caller looks again instead of sleeping);
//   - death: kill(m) makes member m show in deadPeers(), as a process that exited does.
// A member that never runs its plan is a stuck rank: nothing marks it, only the others' timeouts.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "transport/local_group.h"

namespace fakegroup {

namespace transport = conflux::transport;

struct GroupFaults {
  uint32_t seed = 1;
  size_t maxPiece = 0;   ///< largest write accepted at once (0: whatever fits)
  int stallOneIn = 0;    ///< one write or read in this many finds nothing to do (0: never)
  bool coresFar = false; ///< what coresFarApart() answers
};

class FakeNode {
 public:
  /// `size` members. Each stream buffers `capacity` bytes (a
  /// multiple of 8); each member has two staging halves of `stagingBytes`.
  FakeNode(int size, size_t capacity, size_t stagingBytes, GroupFaults faults)
      : size_(size), capacity_(capacity), stagingBytes_(stagingBytes), faults_(faults), members_(size_t(size)) {
    for (int m = 0; m < size; ++m) {
      Member& me = members_[size_t(m)];
      me.staging.assign(2 * stagingBytes, std::byte{0});
      me.streams.resize(size_t(size));
      for (auto& s : me.streams) s = std::make_unique<Stream>(capacity);
    }
  }

  class Group;
  /// Member `m`'s view; the node must outlive it.
  std::unique_ptr<transport::LocalGroup> member(int m);

  /// Member `m`'s process "exited": every member's deadPeers() reports it from now on.
  void kill(int m) { members_[size_t(m)].dead.store(true); }
  /// The barrier generations member `m` passed to noteBarrierSeen, in order (read once its calls ended).
  const std::vector<uint64_t>& barriersSeen(int m) const { return members_[size_t(m)].barriersSeen; }
  /// Barriers member `m` has arrived at.
  uint64_t arrivals(int m) const { return members_[size_t(m)].arrivals.load(); }

 private:
  // The stream from one member to another, held by its receiver: `head` bytes ever written, `tail` bytes
  // ever consumed, as the shared-memory channels count them.
  struct Stream {
    explicit Stream(size_t capacity) : buf(capacity) {}
    std::vector<std::byte> buf;
    std::atomic<uint64_t> head{0}, tail{0};
  };
  struct Member {
    std::vector<std::unique_ptr<Stream>> streams;  ///< by sender: the stream into this member
    std::vector<std::byte> staging;
    std::atomic<uint64_t> arrivals{0};
    std::atomic<bool> dead{false};
    std::atomic<uint64_t> completedCall{0};
    std::vector<uint64_t> barriersSeen;  ///< noteBarrierSeen's generations (only this member's thread writes)
    std::mutex mutex;  // guards the fields below and is the doorbell's condition variable's
    std::condition_variable cv;
    std::atomic<uint32_t> bell{0};
    std::optional<transport::SharedError> error;
    std::map<uint64_t, transport::CallDescriptor> calls;  ///< the last few published, by seq
    uint64_t progressCall = 0;  ///< publishProgress: the call, and the latest time (ns) published with its hops
    transport::LocalGroup::PeerProgress progress;
  };

  void ring(int m) {
    Member& mm = members_[size_t(m)];
    {
      std::lock_guard lock(mm.mutex);
      mm.bell.fetch_add(1);
    }
    mm.cv.notify_all();
  }
  void ringAll() {
    for (int m = 0; m < size_; ++m) ring(m);
  }
  void ringOthers(int me) {
    for (int m = 0; m < size_; ++m) {
      if (m != me) ring(m);
    }
  }

  const int size_;
  const size_t capacity_;
  const size_t stagingBytes_;
  const GroupFaults faults_;
  std::vector<Member> members_;
};

class FakeNode::Group final : public transport::LocalGroup {
 public:
  Group(FakeNode& node, int me) : node_(node), me_(me), rng_(node.faults_.seed * 7919u + uint32_t(me)) {
    for (int p = 0; p < node.size_; ++p) {
      senders_.push_back(std::make_unique<Sender>(*this, p));
      receivers_.push_back(std::make_unique<Receiver>(*this, p));
    }
  }

  int localRank() const override { return me_; }
  int localSize() const override { return node_.size_; }
  // Bad member numbers are errors here as in the shared-memory group, so a plan that names one fails
  // in these tests too rather than reading out of bounds.
  transport::SendChannel& sendTo(int p) override { return *senders_[checkPeer(p)]; }
  transport::RecvChannel& recvFrom(int p) override { return *receivers_[checkPeer(p)]; }
  std::byte* staging(int p, uint64_t epoch) override {
    return node_.members_[checkMember(p)].staging.data() + (epoch & 1) * node_.stagingBytes_;
  }
  size_t stagingBytes() const override { return node_.stagingBytes_; }

  uint64_t barrierArrive() override {
    const uint64_t gen = node_.members_[size_t(me_)].arrivals.fetch_add(1) + 1;
    if (barrierReached(gen)) node_.ringOthers(me_);
    return gen;
  }
  bool barrierReached(uint64_t gen) const override { return barrierLaggard(gen) < 0; }
  int barrierLaggard(uint64_t gen) const override {
    for (int m = 0; m < node_.size_; ++m) {
      if (!barrierReachedBy(m, gen)) return m;
    }
    return -1;
  }
  bool barrierReachedBy(int p, uint64_t gen) const override { return node_.members_[size_t(p)].arrivals.load() >= gen; }
  bool coresFarApart() const override { return node_.faults_.coresFar; }
  void noteBarrierSeen(uint64_t gen) override { node_.members_[size_t(me_)].barriersSeen.push_back(gen); }

  uint32_t doorbell() const override { return node_.members_[size_t(me_)].bell.load(); }
  void sleep(uint32_t seen, int timeoutMs) override {
    if (timeoutMs == 0) return;
    Member& m = node_.members_[size_t(me_)];
    std::unique_lock lock(m.mutex);
    auto rung = [&] { return m.bell.load() != seen; };
    if (timeoutMs < 0) m.cv.wait(lock, rung);
    else m.cv.wait_for(lock, std::chrono::milliseconds(timeoutMs), rung);
  }
  void wakeSelf() override { node_.ring(me_); }

  std::vector<int> deadPeers() override {
    std::vector<int> out;
    for (int m = 0; m < node_.size_; ++m) {
      if (node_.members_[size_t(m)].dead.load()) out.push_back(m);
    }
    return out;
  }
  void postError(const transport::SharedError& err) override {
    for (int m = 0; m < node_.size_; ++m) {
      Member& mm = node_.members_[size_t(m)];
      std::lock_guard lock(mm.mutex);
      if (!mm.error) mm.error = err;
    }
    node_.ringAll();
  }
  std::optional<transport::SharedError> error() const override {
    Member& m = node_.members_[size_t(me_)];
    std::lock_guard lock(m.mutex);
    return m.error;
  }

  void publishProgress(int64_t steadyNs, uint64_t call, uint32_t hops) override {
    Member& m = node_.members_[size_t(me_)];
    std::lock_guard lock(m.mutex);
    if (m.progressCall != call) m.progress = PeerProgress{};  // as in shared memory: none of the old call's
    m.progressCall = call;
    if (steadyNs > m.progress.ns) m.progress = PeerProgress{steadyNs, hops};
  }
  PeerProgress peerProgress(int p, uint64_t call) const override {
    Member& m = node_.members_[checkMember(p)];
    std::lock_guard lock(m.mutex);
    return m.progressCall == call ? m.progress : PeerProgress{};
  }
  void publishCompleted(uint64_t seq) override {
    std::atomic<uint64_t>& w = node_.members_[size_t(me_)].completedCall;
    if (seq > w.load(std::memory_order_relaxed)) w.store(seq, std::memory_order_release);
  }
  uint64_t peerCompleted(int p) const override {
    return node_.members_[checkMember(p)].completedCall.load(std::memory_order_acquire);
  }

  void publishCall(const transport::CallDescriptor& d) override {
    Member& m = node_.members_[size_t(me_)];
    {
      std::lock_guard lock(m.mutex);
      m.calls[d.seq] = d;
      while (m.calls.size() > 4) m.calls.erase(m.calls.begin());
    }
  }
  std::optional<transport::CallDescriptor> peerCall(int p, uint64_t seq) const override {
    Member& m = node_.members_[size_t(p)];
    std::lock_guard lock(m.mutex);
    auto it = m.calls.find(seq);
    if (it == m.calls.end()) return std::nullopt;
    return it->second;
  }

 private:
  size_t checkMember(int p) const {
    if (p < 0 || p >= node_.size_) {
      throw conflux::Error(conflux::Code::InvalidArgument, "fake group: local rank " + std::to_string(p) + " out of range");
    }
    return size_t(p);
  }
  size_t checkPeer(int p) const {
    if (checkMember(p) == size_t(me_)) throw conflux::Error(conflux::Code::InvalidArgument, "fake group: no channel from a rank to itself");
    return size_t(p);
  }

  // Draws whether this write or read stalls, and how many bytes a write may take.
  bool stalls() {
    const int n = node_.faults_.stallOneIn;
    if (n <= 0 || std::uniform_int_distribution<int>(0, n - 1)(rng_) != 0) return false;
    node_.ring(me_);
    return true;
  }
  size_t piece(size_t want) {
    const size_t max = node_.faults_.maxPiece;
    if (max == 0 || want <= 1) return want;
    return std::min(want, std::uniform_int_distribution<size_t>(1, max)(rng_));
  }

  class Sender final : public transport::SendChannel {
   public:
    Sender(Group& g, int to) : g_(g), to_(to) {}
    size_t write(const void* src, size_t bytes) override {
      return writeWith(bytes, 1, [&](std::byte* dst, size_t off, size_t n) {
        std::memcpy(dst, static_cast<const std::byte*>(src) + off, n);
      });
    }
    size_t writeTransformed(const void* src, size_t bytes, size_t granule, Transform transform,
                            const void* ctx) override {
      return writeWith(bytes, granule, [&](std::byte* dst, size_t off, size_t n) {
        transform(dst, static_cast<const std::byte*>(src) + off, n, ctx);
      });
    }
    size_t writable() const override {
      const Stream& s = stream();
      return g_.node_.capacity_ - (s.head.load() - s.tail.load(std::memory_order_acquire));
    }

   private:
    Stream& stream() const { return *g_.node_.members_[size_t(to_)].streams[size_t(g_.me_)]; }
    template <class Fill>
    size_t writeWith(size_t bytes, size_t granule, Fill&& fill) {
      if (bytes == 0 || g_.stalls()) return 0;
      Stream& s = stream();
      const uint64_t head = s.head.load(std::memory_order_relaxed);
      size_t n = std::min(bytes, writable());
      n = g_.piece(n);
      const size_t cap = g_.node_.capacity_;
      // Granules never straddle the buffer's end (the capacity and every message are multiples of 8).
      n = std::min<size_t>(n, cap - head % cap);
      n -= n % granule;
      if (n == 0) return 0;
      fill(s.buf.data() + head % cap, 0, n);
      s.head.store(head + n, std::memory_order_release);
      g_.node_.ring(to_);
      return n;
    }
    Group& g_;
    const int to_;
  };

  class Receiver final : public transport::RecvChannel {
   public:
    Receiver(Group& g, int from) : g_(g), from_(from) {}
    std::span<const std::byte> readable(size_t maxBytes) override {
      if (g_.stalls()) return {};
      Stream& s = stream();
      const uint64_t tail = s.tail.load(std::memory_order_relaxed);
      const uint64_t avail = s.head.load(std::memory_order_acquire) - tail;
      const size_t cap = g_.node_.capacity_;
      const size_t n = std::min<uint64_t>({avail, maxBytes, cap - tail % cap});
      return {s.buf.data() + tail % cap, n};
    }
    void consume(size_t n) override {
      Stream& s = stream();
      s.tail.store(s.tail.load(std::memory_order_relaxed) + n, std::memory_order_release);
      g_.node_.ring(from_);
    }

   private:
    Stream& stream() const { return *g_.node_.members_[size_t(g_.me_)].streams[size_t(from_)]; }
    Group& g_;
    const int from_;
  };

  FakeNode& node_;
  const int me_;
  std::mt19937 rng_;
  std::vector<std::unique_ptr<Sender>> senders_;
  std::vector<std::unique_ptr<Receiver>> receivers_;
};

inline std::unique_ptr<transport::LocalGroup> FakeNode::member(int m) { return std::make_unique<Group>(*this, m); }

}  // namespace fakegroup
