// Plain-data layout of one local rank's shared-memory segment.
//
//   offset 0                 control block (one page): segment info, doorbell, barrier counter,
//                            error slot, call-descriptor ring
//   kPageBytes               eager slots: two of kEagerSlotBytes (parity 0 and 1), each one EagerSlot
//   kControlBytes            incoming channels, one per local peer (localSize - 1 of them), each
//                            [one page: ChannelHeader][ring of channelCapacity bytes]
//   stagingOffset            staging: two halves of stagingStride bytes (epoch & 1 picks one)
//
// Every region starts on a page boundary. Words written by different processes live on different
// 128-byte blocks (two cache lines: adjacent-line prefetchers pull pairs of lines, so 64 bytes alone can
// still false-share). Everything here is mapped by several processes at different addresses: no pointers,
// only offsets and fixed-size fields, and every concurrently accessed word is a lock-free std::atomic
// (address-free, so it works across processes and with futex).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace conflux::shm {

inline constexpr size_t kPageBytes = 4096;
/// Separation between words written by different processes.
inline constexpr size_t kSeparation = 128;
/// "CFXSHM01" little-endian: identifies a Conflux segment of this layout family.
inline constexpr uint64_t kSegmentMagic = 0x31304d4853584643ull;
inline constexpr uint32_t kLayoutVersion = 7;  // 3: eager slots of four pages; 4: DirectSlot::sendAddress, sendBytes, coll, singleCopy; 5: ProgressWord::stamp; 6: eager slots of 17 pages; 7: BarrierWord::stamp
/// Call descriptors kept per rank (indexed by seq % kCallSlots).
inline constexpr uint64_t kCallSlots = 16;
/// Longest error message kept in a slot (characters, without the terminating NUL).
inline constexpr size_t kErrorMessageMax = 200;
/// Bytes of one eager slot: header (32 bytes) and payload of a small collective's input. Seventeen
/// pages, so that 64 KiB of input fit: from 16 to 64 KiB per rank the eager path (one flag, no barrier)
/// took 0.65-0.87 of the plans' time on 2 ranks (docs/performance-method.md, "Small calls"); with four
/// pages it stopped at 16352 bytes, just short of the power-of-two sizes most callers use.
inline constexpr size_t kEagerSlotBytes = 17 * kPageBytes;
/// Bytes of the control region (page aligned): the control block, then two eager slots.
inline constexpr size_t kControlBytes = kPageBytes + 2 * kEagerSlotBytes;
/// Bytes of the header page in front of each channel ring.
inline constexpr size_t kChannelHeaderBytes = kPageBytes;

static_assert(std::atomic<uint32_t>::is_always_lock_free, "shared-memory atomics must be lock-free");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared-memory atomics must be lock-free");
static_assert(sizeof(std::atomic<uint32_t>) == 4, "futex words must be plain 32-bit words");
static_assert(sizeof(std::atomic<uint64_t>) == 8);

/// Written once by the owner before the bootstrap exchange, read by peers after it (the exchange orders
/// the accesses), so plain fields suffice. Peers check it against their own layout.
struct alignas(kSeparation) SegmentInfo {
  uint64_t magic;
  uint32_t version;
  int32_t localRank;
  int32_t localSize;
  int32_t pid;
  uint64_t segmentBytes;
  uint64_t channelCapacity;
  uint64_t stagingStride;
};

/// The owner's doorbell. seq is the futex word; sleepers counts the owner's threads that may be inside
/// FUTEX_WAIT, so ringers skip the wake syscall when nobody sleeps (see doorbell.h for the protocol).
struct alignas(kSeparation) DoorbellWords {
  std::atomic<uint32_t> seq;
  std::atomic<uint32_t> sleepers;
};

/// Barrier arrivals of the owner (monotonic; written only by the owner). Before arriving at generation g
/// the owner stores the arrival's stamp (transport/shm/core_distance.h: g's low bits and the steady-clock
/// time) in stamp[g & 1]. A peer that saw g complete reads stamp[g & 1] before it arrives at g + 1, and
/// the owner rewrites that slot only at g + 2, which it cannot reach before then.
struct alignas(kSeparation) BarrierWord {
  std::atomic<uint64_t> arrived;
  std::atomic<uint64_t> stamp[2];
};

/// The owner's latest progress and the collective call it was made in (LocalGroup::publishProgress: the
/// call is stored before the stamp, a reader checks it before and after), and the last collective call it
/// completed (LocalGroup::publishCompleted). Only the owner stores them. The stamp packs the progress
/// notices the time came through (top kProgressHopBits bits) with the steady-clock time in ns, so that a
/// reader never sees one without the other.
struct alignas(kSeparation) ProgressWord {
  static constexpr int kProgressHopBits = 4;  // counts to 15; the executor passes on fewer than 8
  static constexpr int kProgressTimeBits = 64 - kProgressHopBits;
  static constexpr uint64_t kTimeMask = (uint64_t(1) << kProgressTimeBits) - 1;
  std::atomic<uint64_t> call;
  std::atomic<uint64_t> stamp;
  std::atomic<uint64_t> completedCall;
};

/// Error slot states.
enum : uint32_t { kErrorEmpty = 0, kErrorWriting = 1, kErrorPosted = 2 };

/// Shared error: the first poster claims the slot by CAS (empty -> writing), fills the plain fields, then
/// publishes with a release store of kErrorPosted. Readers acquire `state` before reading the fields; the
/// fields are never written again, so they need not be atomic.
struct alignas(kSeparation) ErrorSlot {
  std::atomic<uint32_t> state;
  int32_t code;
  int32_t failedRank;
  int32_t reporterRank;
  char message[kErrorMessageMax + 1];
};

/// One call descriptor, a seqlock: the writer stores seq = 0, then the fields, then seq = call number
/// (release); a reader checks seq before and after reading the fields. Fields are relaxed atomics so that
/// a reader racing with an overwrite reads torn values (then discarded) instead of causing a data race.
struct alignas(64) CallSlot {
  std::atomic<uint64_t> seq;
  std::atomic<uint64_t> count;
  std::atomic<uint32_t> coll;
  std::atomic<uint32_t> dtype;
  std::atomic<uint32_t> op;
  std::atomic<int32_t> root;
};

/// A small collective's input, published with one flag (src/eager.h has the protocol). The owner
/// writes the descriptor fields and the payload, then stores seq (release); readers acquire seq and then
/// read the rest. The fields and payload are rewritten only after every reader is known to be done, so
/// they need not be atomic. The payload starts in the flag's cache line: 8 bytes travel in one line.
struct alignas(kSeparation) EagerSlot {
  std::atomic<uint64_t> seq;  ///< Eager call number (1-based) whose input this slot holds.
  uint64_t count;
  uint8_t coll;
  uint8_t dtype;
  uint8_t op;
  /// 1 + (the CPU the owner last published from, modulo 255), 0: unknown; a hint, read (relaxed) before
  /// seq says the slot is published (src/eager.cc).
  std::atomic<uint8_t> cpu;
  int32_t root;
  uint64_t callSeq;           ///< The communicator's call number (for messages).
  std::byte payload[kEagerSlotBytes - 32];
};

/// Where a rank's buffers of one call live, for direct algorithms (src/direct_call.cc has the protocol).
/// The owner writes the fields, then stores seq (release) before arriving at the call's first barrier;
/// peers read them after that barrier. A buffer with id 0 is not peer-mappable.
struct SharedBufferRef {
  uint64_t id;      ///< SharedBlock::id in the owner's process, 0: not mappable.
  uint64_t bytes;   ///< Block length.
  uint64_t offset;  ///< The buffer's offset in the block.
  int32_t fd;       ///< The block's memfd in the owner's process.
  int32_t reserved;
};
struct alignas(kSeparation) DirectSlot {
  std::atomic<uint64_t> seq;  ///< Direct-eligible call number (1-based) the fields describe.
  SharedBufferRef send;
  SharedBufferRef recv;
  uint64_t sendAddress;       ///< The send buffer's address in the owner's process (single-copy reads).
  uint64_t sendBytes;         ///< The owner's send size for this call (peers check that theirs agree).
  uint32_t coll;              ///< The owner's collective (conflux::Collective) for this call.
  uint32_t singleCopy;        ///< 1: the owner offers single-copy reads for this call (src/direct_call.h).
};

/// Start of every segment.
struct ControlBlock {
  SegmentInfo info;
  DoorbellWords bell;
  BarrierWord barrier;
  ProgressWord progress;
  ErrorSlot error;
  CallSlot calls[kCallSlots];
  DirectSlot direct;
};

/// Head of one single-producer single-consumer byte ring, in the receiver's segment. head counts bytes
/// ever written (only the sender stores it), tail bytes ever consumed (only the receiver stores it); both
/// are 64-bit and never wrap in practice, so head - tail is always the fill level.
struct ChannelHeader {
  alignas(kSeparation) std::atomic<uint64_t> head;
  alignas(kSeparation) std::atomic<uint64_t> tail;
};

static_assert(std::is_standard_layout_v<ControlBlock>);
static_assert(sizeof(ControlBlock) <= kPageBytes, "control block must fit its page");
static_assert(sizeof(ChannelHeader) <= kChannelHeaderBytes);
static_assert(offsetof(ControlBlock, bell) % kSeparation == 0);
static_assert(offsetof(ControlBlock, barrier) - offsetof(ControlBlock, bell) >= kSeparation);
static_assert(offsetof(ControlBlock, error) - offsetof(ControlBlock, barrier) >= kSeparation);
static_assert(offsetof(ChannelHeader, tail) - offsetof(ChannelHeader, head) >= kSeparation);
static_assert(sizeof(CallSlot) == 64);
static_assert(sizeof(EagerSlot) == kEagerSlotBytes);
static_assert(offsetof(EagerSlot, payload) == 32);

constexpr uint64_t roundUp(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

/// Offsets and sizes of one segment; identical for every local rank of a world.
struct SegmentLayout {
  uint64_t channelCapacity = 0;  ///< Ring bytes per channel (multiple of kPageBytes).
  uint64_t channelCount = 0;     ///< Incoming channels: localSize - 1.
  uint64_t channelStride = 0;    ///< kChannelHeaderBytes + channelCapacity.
  uint64_t stagingOffset = 0;
  uint64_t stagingStride = 0;    ///< One half of the staging area (multiple of kPageBytes).
  uint64_t totalBytes = 0;

  /// Offset of the channel that carries data from `sender` into the segment of `receiver`.
  constexpr uint64_t channelOffset(int receiver, int sender) const {
    const uint64_t slot = static_cast<uint64_t>(sender < receiver ? sender : sender - 1);
    return kControlBytes + slot * channelStride;
  }
};

/// Layout for `localSize` ranks; byte counts of 0 are raised to one page.
constexpr SegmentLayout computeLayout(int localSize, uint64_t channelBytes, uint64_t stagingBytes) {
  SegmentLayout l;
  l.channelCapacity = roundUp(channelBytes == 0 ? 1 : channelBytes, kPageBytes);
  l.channelCount = localSize > 1 ? static_cast<uint64_t>(localSize - 1) : 0;
  l.channelStride = kChannelHeaderBytes + l.channelCapacity;
  l.stagingOffset = kControlBytes + l.channelCount * l.channelStride;
  l.stagingStride = roundUp(stagingBytes == 0 ? 1 : stagingBytes, kPageBytes);
  l.totalBytes = l.stagingOffset + 2 * l.stagingStride;
  return l;
}

static_assert(computeLayout(2, 1, 1).totalBytes == kControlBytes + 4 * kPageBytes);
static_assert(computeLayout(3, 1 << 20, 0).channelOffset(1, 2) == kControlBytes + kPageBytes + (1 << 20));
static_assert(kControlBytes == kPageBytes + 2 * kEagerSlotBytes);

}  // namespace conflux::shm
