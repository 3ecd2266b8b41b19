// State of one isend/irecv/iwrite shared by its Request and the rails that carry its chunks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "transport/ofi/transport.h"

namespace conflux::ofi {

class MrCache;

namespace detail {

/// One operation; its done/failed/status/bytes (transport::RequestState) are written under the Transport's
/// lock by whichever thread reads the completion, and read without it through Request.
struct Op : transport::RequestState {
  bool send = false;          ///< transmit direction (sends and writes share the per-peer send queue)
  bool write = false;         ///< an RMA write (send is true as well)
  int peer = 0;
  uint64_t userTag = 0;
  uint8_t* buf = nullptr;
  size_t chunkBytes = 0;
  uint32_t nchunks = 1;
  uint32_t railOffset = 0;    ///< chunk c travels on rail (c + railOffset) % rails
  uint32_t completed = 0;     ///< chunks finished
  uint32_t outstanding = 0;   ///< chunks posted to a provider and not yet finished
  Clock::time_point start;
  MemoryRegion* mr[kMaxRails] = {};
  MrCache* mrCache[kMaxRails] = {};
  // Writes only: where chunk 0 lands on each rail (the peer's base + dstOffset) and that rail's key.
  size_t dstOffset = 0;
  uint64_t remoteAddr[kMaxRails] = {};
  uint64_t remoteKey[kMaxRails] = {};

  size_t chunkOffset(uint32_t c) const { return size_t(c) * chunkBytes; }
  size_t chunkLen(uint32_t c) const {
    const size_t off = chunkOffset(c);
    return off >= bytes ? 0 : (bytes - off < chunkBytes ? bytes - off : chunkBytes);
  }
  const char* verb() const { return write ? "write to" : send ? "send to" : "recv from"; }

  /// Unpins the op's registrations (implemented in memory-aware endpoint.cc).
  void releaseMrs();
  void finish() {
    releaseMrs();
    done = true;
  }
  /// Records the first error; the op finishes once no chunk is posted any more.
  void fail(Status s) {
    if (!failed) {
      status = std::move(s);
      failed = true;
    }
    if (outstanding == 0 && !done) finish();
  }
  /// One posted chunk of `len` bytes finished successfully.
  void chunkDone(size_t len) {
    --outstanding;
    ++completed;
    movedBytes.fetch_add(len, std::memory_order_relaxed);
    if (completed == nchunks || (failed && outstanding == 0)) finish();
  }
};

}  // namespace detail

/// "ofi rank R: send to rank P (tag 0x.., N bytes)" or "ofi rank R: write to rank P (N bytes at offset O)"
/// for error messages.
std::string describeOp(const detail::Op& op, int selfRank);
}  // namespace conflux::ofi
