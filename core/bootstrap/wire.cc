// The rendezvous store's wire protocol; see wire.h.
#include "core/bootstrap/wire.h"

namespace conflux::bootstrap::wire {

void putU16(std::vector<uint8_t>& out, uint16_t v) {
  out.push_back(static_cast<uint8_t>(v >> 8));
  out.push_back(static_cast<uint8_t>(v));
}

void putU32(std::vector<uint8_t>& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(v >> s));
}

void putU64(std::vector<uint8_t>& out, uint64_t v) {
  for (int s = 56; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(v >> s));
}

uint32_t getU32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

uint64_t getU64(const uint8_t* p) { return (uint64_t{getU32(p)} << 32) | getU32(p + 4); }

std::vector<uint8_t> frame(Msg type, const std::vector<uint8_t>& body) {
  std::vector<uint8_t> out;
  out.reserve(kHeaderBytes + 1 + body.size());
  putU32(out, static_cast<uint32_t>(1 + body.size()));
  out.push_back(static_cast<uint8_t>(type));
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

std::vector<uint8_t> requestHead(Msg type, std::string_view key, size_t trailer) {
  std::vector<uint8_t> out;
  out.reserve(kHeaderBytes + 3 + key.size());
  putU32(out, static_cast<uint32_t>(1 + 2 + key.size() + trailer));
  out.push_back(static_cast<uint8_t>(type));
  putU16(out, static_cast<uint16_t>(key.size()));
  out.insert(out.end(), key.begin(), key.end());
  return out;
}

std::string parseRequest(Msg type, const uint8_t* body, size_t len, Request* out) {
  if (len < 2) return "request too short";
  size_t keyLen = (size_t{body[0]} << 8) | body[1];
  if (keyLen > kMaxKeyBytes) {
    return "key of " + std::to_string(keyLen) + " bytes exceeds the " + std::to_string(kMaxKeyBytes) + "-byte limit";
  }
  if (2 + keyLen > len) return "key runs past the end of the frame";
  out->type = type;
  out->key = std::string_view(reinterpret_cast<const char*>(body + 2), keyLen);
  out->operand = body + 2 + keyLen;
  out->operandLen = len - 2 - keyLen;
  size_t expected = 0;
  switch (type) {
    case Msg::Set:
      if (out->operandLen > kMaxValueBytes) {
        return "value of " + std::to_string(out->operandLen) + " bytes exceeds the " +
               std::to_string(kMaxValueBytes) + "-byte limit";
      }
      return {};
    case Msg::Get: expected = 4; break;
    case Msg::Add: expected = 8; break;
    case Msg::Check:
    case Msg::Delete: expected = 0; break;
    default: return "unknown request type " + std::to_string(static_cast<int>(type));
  }
  if (out->operandLen != expected) return "malformed operand";
  return {};
}

namespace {
std::string_view bytes(const uint8_t* p, size_t n) { return {reinterpret_cast<const char*>(p), n}; }
}  // namespace

Digest clientProof(const std::array<uint8_t, 32>& secret, const uint8_t* ns, const uint8_t* nc) {
  return hmacSha256(secret.data(), secret.size(),
                    {"conflux-store-client", bytes(ns, kNonceBytes), bytes(nc, kNonceBytes)});
}

Digest serverProof(const std::array<uint8_t, 32>& secret, const uint8_t* ns, const uint8_t* nc) {
  return hmacSha256(secret.data(), secret.size(),
                    {"conflux-store-server", bytes(ns, kNonceBytes), bytes(nc, kNonceBytes)});
}

}  // namespace conflux::bootstrap::wire
