// The rendezvous store's table; see kv_table.h.
#include "core/bootstrap/kv_table.h"

#include <charconv>

namespace conflux::bootstrap {

std::string KvTable::set(std::string_view key, SharedValue value) {
  auto it = map_.find(std::string(key));
  size_t old = it == map_.end() ? 0 : key.size() + it->second->size();
  size_t now = key.size() + value->size();
  if (bytes_ - old + now > maxBytes_) {
    return "store full: storing " + std::to_string(now) + " bytes under '" + std::string(key) +
           "' would exceed the " + std::to_string(maxBytes_) + "-byte limit";
  }
  bytes_ = bytes_ - old + now;
  if (it == map_.end()) {
    map_.emplace(std::string(key), std::move(value));
  } else {
    it->second = std::move(value);
  }
  return {};
}

std::string KvTable::add(std::string_view key, int64_t delta, int64_t* result) {
  int64_t current = 0;
  if (SharedValue v = find(key)) {
    const char* begin = reinterpret_cast<const char*>(v->data());
    auto [end, ec] = std::from_chars(begin, begin + v->size(), current);
    if (ec != std::errc() || end != begin + v->size()) {
      return "the value under '" + std::string(key) + "' is not an integer";
    }
  }
  int64_t sum;
  if (__builtin_add_overflow(current, delta, &sum)) {
    return "adding " + std::to_string(delta) + " to '" + std::string(key) + "' overflows";
  }
  std::string text = std::to_string(sum);
  std::string err = set(key, std::make_shared<const std::vector<uint8_t>>(text.begin(), text.end()));
  if (err.empty()) *result = sum;
  return err;
}

SharedValue KvTable::find(std::string_view key) const {
  auto it = map_.find(std::string(key));
  return it == map_.end() ? nullptr : it->second;
}

bool KvTable::erase(std::string_view key) {
  auto it = map_.find(std::string(key));
  if (it == map_.end()) return false;
  bytes_ -= it->first.size() + it->second->size();
  map_.erase(it);
  return true;
}

}  // namespace conflux::bootstrap
