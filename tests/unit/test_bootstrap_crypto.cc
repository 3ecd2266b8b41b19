// Bootstrap crypto (SHA-256 FIPS 180-2 vectors, HMAC-SHA256 RFC 4231 vectors) and unique-id encoding.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>

#include "core/bootstrap/crypto.h"
#include "core/bootstrap/unique_id.h"
#include "core/error.h"

using namespace conflux;
using namespace conflux::bootstrap;

namespace {

std::string hex(const Digest& d) { return toHex(d.data(), d.size()); }

std::string hmacHex(const std::string& key, const std::string& data) {
  return hex(hmacSha256(key.data(), key.size(), {data}));
}

}  // namespace

TEST(BootstrapCrypto, Sha256Fips180Vectors) {
  EXPECT_EQ(hex(sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex(sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  std::string million(1000000, 'a');
  EXPECT_EQ(hex(sha256(million)), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(BootstrapCrypto, Sha256IncrementalMatchesOneShot) {
  std::string text;
  for (int i = 0; i < 300; ++i) text += static_cast<char>('a' + i % 26);
  for (size_t split : {0u, 1u, 55u, 56u, 63u, 64u, 65u, 128u, 299u}) {
    Sha256 h;
    h.update(text.substr(0, split)).update(text.substr(split));
    EXPECT_EQ(hex(h.finish()), hex(sha256(text))) << "split at " << split;
  }
}

TEST(BootstrapCrypto, HmacSha256Rfc4231Vectors) {
  EXPECT_EQ(hmacHex(std::string(20, '\x0b'), "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(hmacHex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(hmacHex(std::string(20, '\xaa'), std::string(50, '\xdd')),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  std::string key4;
  for (int i = 1; i <= 25; ++i) key4 += static_cast<char>(i);
  EXPECT_EQ(hmacHex(key4, std::string(50, '\xcd')),
            "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  // Test case 5 truncates the output to 128 bits.
  EXPECT_EQ(hmacHex(std::string(20, '\x0c'), "Test With Truncation").substr(0, 32),
            "a3b6167473100ee06e0c796c2955552b");
  EXPECT_EQ(hmacHex(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First"),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  EXPECT_EQ(hmacHex(std::string(131, '\xaa'),
                    "This is a test using a larger than block-size key and a larger than block-size data. The "
                    "key needs to be hashed before being used by the HMAC algorithm."),
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

TEST(BootstrapCrypto, HmacOverPartsEqualsConcatenation) {
  const std::string key = "k";
  EXPECT_EQ(hex(hmacSha256(key.data(), key.size(), {"ab", "", "cd"})),
            hex(hmacSha256(key.data(), key.size(), {"abcd"})));
}

TEST(BootstrapCrypto, ConstantTimeEqualRandomAndHex) {
  uint8_t a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 4}, c[4] = {1, 2, 3, 5};
  EXPECT_TRUE(constantTimeEqual(a, b, 4));
  EXPECT_FALSE(constantTimeEqual(a, c, 4));
  EXPECT_TRUE(constantTimeEqual(a, c, 3));
  auto r1 = randomBytes(32), r2 = randomBytes(32);
  EXPECT_EQ(r1.size(), 32u);
  EXPECT_NE(r1, r2);
  EXPECT_EQ(toHex(a, 4), "01020304");
  uint8_t back[4];
  EXPECT_TRUE(fromHex("01020304", back, 4));
  EXPECT_EQ(std::memcmp(a, back, 4), 0);
  EXPECT_TRUE(fromHex("ABcdEF00", back, 4));
  EXPECT_FALSE(fromHex("0102030", back, 4));
  EXPECT_FALSE(fromHex("0102030g", back, 4));
}

namespace {

UniqueId v4Id() {
  UniqueId id;
  auto& in = reinterpret_cast<sockaddr_in&>(id.addr);
  in.sin_family = AF_INET;
  in.sin_port = htons(41234);
  inet_pton(AF_INET, "10.1.2.3", &in.sin_addr);
  id.addrLen = sizeof(sockaddr_in);
  for (size_t i = 0; i < id.secret.size(); ++i) id.secret[i] = static_cast<uint8_t>(i * 3 + 1);
  return id;
}

}  // namespace

TEST(BootstrapUniqueId, RoundTripIpv4) {
  UniqueId id = v4Id();
  cfxUniqueId raw = encode(id);
  UniqueId back = decode(raw);
  EXPECT_EQ(back.addrLen, sizeof(sockaddr_in));
  EXPECT_EQ(describe(back), "10.1.2.3:41234");
  EXPECT_EQ(back.secret, id.secret);
  EXPECT_EQ(jobTag(back), jobTag(id));
}

TEST(BootstrapUniqueId, RoundTripIpv6) {
  UniqueId id;
  auto& in6 = reinterpret_cast<sockaddr_in6&>(id.addr);
  in6.sin6_family = AF_INET6;
  in6.sin6_port = htons(5000);
  in6.sin6_scope_id = 7;
  inet_pton(AF_INET6, "fe80::1", &in6.sin6_addr);
  id.addrLen = sizeof(sockaddr_in6);
  UniqueId back = decode(encode(id));
  EXPECT_EQ(describe(back), "[fe80::1]:5000");
  EXPECT_EQ(reinterpret_cast<sockaddr_in6&>(back.addr).sin6_scope_id, 7u);
}

TEST(BootstrapUniqueId, BadMagicVersionFamilyAreRefused) {
  cfxUniqueId raw = encode(v4Id());
  auto expectBad = [](const cfxUniqueId& r, const char* what) {
    try {
      decode(r);
      FAIL() << "decoded a bad id (" << what << ")";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Code::InvalidArgument);
      EXPECT_EQ(std::string(e.what()).rfind("uniqueId: ", 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  cfxUniqueId zero;
  std::memset(&zero, 0, sizeof zero);
  expectBad(zero, "magic");
  cfxUniqueId v = raw;
  v.internal[4] = 9;
  expectBad(v, "version");
  cfxUniqueId f = raw;
  f.internal[5] = 5;
  expectBad(f, "family");
  UniqueId unix;
  unix.addr.ss_family = AF_UNIX;
  EXPECT_THROW(encode(unix), Error);
}

TEST(BootstrapUniqueId, JobTagIsShortHexAndHidesTheSecret) {
  UniqueId a = v4Id(), b = v4Id();
  b.secret[0] ^= 1;
  std::string tag = jobTag(a);
  EXPECT_EQ(tag.size(), 16u);
  EXPECT_EQ(tag.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(tag, jobTag(b));
  EXPECT_EQ(toHex(a.secret.data(), a.secret.size()).find(tag), std::string::npos);
}
