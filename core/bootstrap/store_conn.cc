// One client connection of the rendezvous store; see store_conn.h.
#include "core/bootstrap/store_conn.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>

namespace conflux::bootstrap {
namespace {

std::vector<uint8_t> replyHead(wire::Msg type, size_t bodyLen) {
  std::vector<uint8_t> h;
  wire::putU32(h, static_cast<uint32_t>(1 + bodyLen));
  h.push_back(static_cast<uint8_t>(type));
  return h;
}

constexpr size_t kReadChunk = size_t{1} << 16;

}  // namespace

void StoreConn::nextFrame() {
  headerGot = bodyGot = bodyLen = 0;
  if (body.capacity() > kReadChunk) std::vector<uint8_t>().swap(body);  // do not pin a 4 MiB buffer
}

void StoreConn::queue(wire::Msg type, const std::vector<uint8_t>& bytes) {
  OutChunk o{replyHead(type, bytes.size()), nullptr};
  o.head.insert(o.head.end(), bytes.begin(), bytes.end());
  out.push_back(std::move(o));
}

void StoreConn::queueValue(SharedValue value) {
  size_t n = value->size();
  out.push_back({replyHead(wire::Msg::Value, n), std::move(value)});
}

ConnIo StoreConn::flush() {
  while (!out.empty()) {
    OutChunk& o = out.front();
    iovec iov[2];
    size_t n = 0;
    if (o.sent < o.head.size()) iov[n++] = {o.head.data() + o.sent, o.head.size() - o.sent};
    if (o.value && !o.value->empty()) {
      size_t off = o.sent > o.head.size() ? o.sent - o.head.size() : 0;
      iov[n++] = {const_cast<uint8_t*>(o.value->data()) + off, o.value->size() - off};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n;
    ssize_t r = ::sendmsg(fd.get(), &msg, MSG_NOSIGNAL);
    if (r < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK ? ConnIo::Again : ConnIo::Failed;
    }
    o.sent += static_cast<size_t>(r);
    if (o.sent == o.size()) out.pop_front();
  }
  return ConnIo::Progress;
}

ConnIo StoreConn::read(size_t limit, size_t* badLength) {
  for (;;) {
    uint8_t* dst;
    size_t want;
    if (headerGot < wire::kHeaderBytes) {
      dst = header + headerGot;
      want = wire::kHeaderBytes - headerGot;
    } else {
      want = std::min(bodyLen - bodyGot, kReadChunk);
      if (body.size() < bodyGot + want) body.resize(bodyGot + want);
      dst = body.data() + bodyGot;
    }
    ssize_t r = ::recv(fd.get(), dst, want, 0);
    if (r == 0) return ConnIo::Closed;
    if (r < 0) {
      if (errno == EINTR) continue;
      return errno == EAGAIN || errno == EWOULDBLOCK ? ConnIo::Again : ConnIo::Failed;
    }
    if (headerGot < wire::kHeaderBytes) {
      headerGot += static_cast<size_t>(r);
      if (headerGot == wire::kHeaderBytes) {
        size_t len = wire::getU32(header);
        if (len == 0 || len > limit) {
          *badLength = len;
          return ConnIo::BadLength;
        }
        bodyLen = len;
        bodyGot = 0;
      }
    } else {
      bodyGot += static_cast<size_t>(r);
    }
    return ConnIo::Progress;
  }
}

}  // namespace conflux::bootstrap
