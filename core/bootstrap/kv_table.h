// The rendezvous store's table: keys to immutable shared values, with a cap on the bytes held.
// Values are shared so that answering many waiting GETs of one key copies nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace conflux::bootstrap {

/// A stored value; shared with replies still being sent.
using SharedValue = std::shared_ptr<const std::vector<uint8_t>>;

/// Key-value table with a byte budget (keys + values). Not thread-safe: owned by the server thread.
class KvTable {
 public:
  /// @p maxBytes caps the sum of key and value sizes held.
  explicit KvTable(size_t maxBytes) : maxBytes_(maxBytes) {}

  /// Stores @p value under @p key. Returns an error message (nothing stored) when the budget would be
  /// exceeded, else an empty string.
  std::string set(std::string_view key, SharedValue value);
  /// Adds @p delta to the decimal integer under @p key (0 when absent). Returns an error message when
  /// the value is not an integer, the sum overflows or the budget is exceeded; else stores and sets *result.
  std::string add(std::string_view key, int64_t delta, int64_t* result);
  /// The value under @p key, or null.
  SharedValue find(std::string_view key) const;
  /// Removes @p key; true when it existed.
  bool erase(std::string_view key);
  /// Bytes held (keys + values).
  size_t bytes() const { return bytes_; }
  /// Number of keys.
  size_t size() const { return map_.size(); }

 private:
  std::unordered_map<std::string, SharedValue> map_;
  size_t maxBytes_;
  size_t bytes_ = 0;
};

}  // namespace conflux::bootstrap
