// Small cryptographic helpers for the bootstrap: SHA-256 (FIPS 180-4), HMAC-SHA256 (RFC 2104),
// constant-time comparison and kernel randomness. Written here so that Conflux needs no crypto library;
// they protect the rendezvous store against strangers, not against a hostile root.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace conflux::bootstrap {

/// A SHA-256 digest.
using Digest = std::array<uint8_t, 32>;

/// Incremental SHA-256.
class Sha256 {
 public:
  Sha256();
  /// Feeds @p n bytes.
  Sha256& update(const void* data, size_t n);
  /// Feeds the bytes of @p s.
  Sha256& update(std::string_view s) { return update(s.data(), s.size()); }
  /// Finishes and returns the digest; the object must not be used afterwards.
  Digest finish();

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_{};
  size_t bufLen_ = 0;
  uint64_t totalBytes_ = 0;
};

/// SHA-256 of @p n bytes at @p data.
Digest sha256(const void* data, size_t n);
/// SHA-256 of a string.
inline Digest sha256(std::string_view s) { return sha256(s.data(), s.size()); }

/// HMAC-SHA256 of the concatenation of @p parts under @p key.
Digest hmacSha256(const void* key, size_t keyLen, std::initializer_list<std::string_view> parts);

/// Compares @p n bytes in time independent of where they differ.
bool constantTimeEqual(const void* a, const void* b, size_t n);

/// @p n bytes from the kernel's random source (getrandom); throws Error(SystemError) on failure.
std::vector<uint8_t> randomBytes(size_t n);

/// Lower-case hex of @p n bytes.
std::string toHex(const void* data, size_t n);

/// Parses exactly @p out.size() bytes of hex (either case); false when @p hex is malformed.
bool fromHex(std::string_view hex, uint8_t* out, size_t n);

}  // namespace conflux::bootstrap
