// Coded errors. Setup code throws Error; the data path returns Status; the C ABI converts both to
// cfxResult_t in one place (src/c_api_guard.h) and records the message as the thread's last error.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

namespace conflux {

/// Error codes; values equal cfxResult_t.
enum class Code : int {
  Ok = 0, CudaError = 1, SystemError = 2, InternalError = 3, InvalidArgument = 4,
  InvalidUsage = 5, RemoteError = 6, InProgress = 7, Timeout = 8, Aborted = 9,
};

const char* codeName(Code c);
/// A short stable identifier of the code for machines ("timeout", "remote_error", ...): dumps, metric labels.
const char* codeLabel(Code c);

/// A result with a message; cheap when Ok.
class Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok() { return {}; }

  bool isOk() const { return code_ == Code::Ok; }
  explicit operator bool() const { return isOk(); }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  Code code_ = Code::Ok;
  std::string message_;
};

/// Exception carrying a Code; thrown by setup code (bootstrap, init, config parsing).
class Error : public std::runtime_error {
 public:
  Error(Code code, const std::string& message) : std::runtime_error(message), code_(code) {}
  Code code() const { return code_; }
  Status status() const { return {code_, what()}; }

 private:
  Code code_;
};

/// Throws Error(SystemError) with strerror(errno) appended: "what: strerror".
[[noreturn]] void throwSystemError(const std::string& what);
/// Message "what: strerror(err)".
std::string systemErrorMessage(const std::string& what, int err);

}  // namespace conflux
