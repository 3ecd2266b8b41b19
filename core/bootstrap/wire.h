// The rendezvous store's wire protocol, shared by StoreServer and StoreClient.
//
// Every message is a frame: u32 big-endian length L (1 <= L <= limit), then L bytes: a u8 message type and
// its body. Receivers validate L against the limit of the connection's phase before allocating.
//
// Handshake (mutual challenge-response; the secret never travels):
//   server -> Hello   { u32 magic, u8 version, 32-byte server nonce Ns }
//   client -> Auth    { 32-byte client nonce Nc, HMAC(secret, "conflux-store-client" | Ns | Nc) }
//   server -> AuthOk  { HMAC(secret, "conflux-store-server" | Ns | Nc) }     or AuthFail, then close
// The two proofs use different labels, so neither side can be used to compute the other's answer.
//
// Requests (one outstanding per connection) carry { u16 key length, key, operands }:
//   Set {value} -> Ok | Error            Get {u32 wait ms} -> Value | Missing (wait passed) | Error
//   Add {i64 delta} -> Int | Error       Check {} -> Bool         Delete {} -> Bool
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/bootstrap/crypto.h"

namespace conflux::bootstrap::wire {

enum class Msg : uint8_t {
  Hello = 1, Auth = 2, AuthOk = 3, AuthFail = 4,
  Set = 10, Get = 11, Add = 12, Check = 13, Delete = 14,
  Ok = 20, Value = 21, Int = 22, Bool = 23, Missing = 24, Error = 25,
};

constexpr uint32_t kMagic = 0x43465853;  // "CFXS"
constexpr uint8_t kVersion = 1;
constexpr size_t kNonceBytes = 32;
constexpr size_t kMaxKeyBytes = 256;
constexpr size_t kMaxValueBytes = size_t{4} << 20;
/// Largest frame before authentication (Hello and Auth are far smaller).
constexpr size_t kMaxHandshakeFrame = 128;
/// Largest frame after authentication: type, key length, key, value.
constexpr size_t kMaxFrame = 1 + 2 + kMaxKeyBytes + kMaxValueBytes;
constexpr size_t kHeaderBytes = 4;

/// Appends big-endian integers to a byte vector.
void putU16(std::vector<uint8_t>& out, uint16_t v);
void putU32(std::vector<uint8_t>& out, uint32_t v);
void putU64(std::vector<uint8_t>& out, uint64_t v);
/// Reads big-endian integers (the caller checks bounds).
uint32_t getU32(const uint8_t* p);
uint64_t getU64(const uint8_t* p);

/// A frame header + type + body as one buffer ready to send.
std::vector<uint8_t> frame(Msg type, const std::vector<uint8_t>& body);
/// The header + type + key part of a request; @p trailer bytes follow it on the wire.
std::vector<uint8_t> requestHead(Msg type, std::string_view key, size_t trailer);

/// A parsed request: views into the frame buffer.
struct Request {
  Msg type;
  std::string_view key;
  const uint8_t* operand;  ///< bytes after the key
  size_t operandLen;
};

/// Parses a request body (after the type byte). Returns why it is malformed (key or value too long,
/// unknown type, bad operand), or an empty string on success.
std::string parseRequest(Msg type, const uint8_t* body, size_t len, Request* out);

/// The client's proof for (Ns, Nc).
Digest clientProof(const std::array<uint8_t, 32>& secret, const uint8_t* ns, const uint8_t* nc);
/// The server's proof for (Ns, Nc).
Digest serverProof(const std::array<uint8_t, 32>& secret, const uint8_t* ns, const uint8_t* nc);

}  // namespace conflux::bootstrap::wire
