// One client connection of the rendezvous store (internal to StoreServer): its phase, the frame being
// read and the replies waiting to be sent, with non-blocking read and write steps that never allocate
// more than the validated frame length.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "core/bootstrap/kv_table.h"
#include "core/bootstrap/socket.h"
#include "core/bootstrap/wire.h"

namespace conflux::bootstrap {

/// Handshake -> Ready; Closing = flush the last reply (AuthFail) then close; Dead = closed, to be erased.
enum class ConnPhase { Handshake, Ready, Closing, Dead };

/// Outcome of one I/O step.
enum class ConnIo {
  Progress,   ///< bytes moved (or, for flush, everything sent)
  Again,      ///< the socket is not ready
  Closed,     ///< the peer closed the connection
  Failed,     ///< a socket error (errno preserved)
  BadLength,  ///< the frame header announced an invalid length (nothing allocated)
};

/// A reply being sent: header bytes, then an optional shared value (not copied).
struct OutChunk {
  std::vector<uint8_t> head;
  SharedValue value;
  size_t sent = 0;
  size_t size() const { return head.size() + (value ? value->size() : 0); }
};

/// A client connection's state.
struct StoreConn {
  Fd fd;
  std::string peer;
  ConnPhase phase = ConnPhase::Handshake;
  Deadline deadline;  ///< end of the handshake, or of the final flush when Closing
  std::array<uint8_t, wire::kNonceBytes> nonce{};
  uint8_t header[wire::kHeaderBytes] = {};
  size_t headerGot = 0;
  std::vector<uint8_t> body;  ///< grows as bytes arrive, never beyond bodyLen
  size_t bodyLen = 0, bodyGot = 0;
  std::deque<OutChunk> out;
  bool waiting = false;  ///< a GET is parked until the key appears
  std::string waitKey;
  Deadline waitDeadline;

  /// True when a whole frame (type + body) is in @ref body.
  bool frameComplete() const { return headerGot == wire::kHeaderBytes && bodyGot == bodyLen; }
  /// True while a reply is queued or a GET waits: the next request is not processed yet.
  bool busy() const { return !out.empty() || waiting; }
  /// Forgets the processed frame.
  void nextFrame();
  /// Queues a reply of @p type with @p body.
  void queue(wire::Msg type, const std::vector<uint8_t>& body = {});
  /// Queues a Value reply sharing @p value.
  void queueValue(SharedValue value);
  /// Sends queued replies until all are sent (Progress) or the socket is full (Again).
  ConnIo flush();
  /// Reads towards the current frame, header first; a header announcing 0 or more than @p limit bytes
  /// yields BadLength with the length in @p badLength.
  ConnIo read(size_t limit, size_t* badLength);
};

}  // namespace conflux::bootstrap
