#include "core/error.h"

#include <cerrno>
#include <cstring>

namespace conflux {

const char* codeName(Code c) {
  switch (c) {
    case Code::Ok: return "no error";
    case Code::CudaError: return "unhandled CUDA error";
    case Code::SystemError: return "system error";
    case Code::InternalError: return "internal error";
    case Code::InvalidArgument: return "invalid argument";
    case Code::InvalidUsage: return "invalid usage";
    case Code::RemoteError: return "remote process exited or there was a network error";
    case Code::InProgress: return "operation in progress";
    case Code::Timeout: return "timed out waiting for a peer";
    case Code::Aborted: return "communicator aborted";
  }
  return "unknown error";
}

const char* codeLabel(Code c) {
  switch (c) {
    case Code::Ok: return "ok";
    case Code::CudaError: return "cuda_error";
    case Code::SystemError: return "system_error";
    case Code::InternalError: return "internal_error";
    case Code::InvalidArgument: return "invalid_argument";
    case Code::InvalidUsage: return "invalid_usage";
    case Code::RemoteError: return "remote_error";
    case Code::InProgress: return "in_progress";
    case Code::Timeout: return "timeout";
    case Code::Aborted: return "aborted";
  }
  return "unknown";
}

std::string systemErrorMessage(const std::string& what, int err) {
  char buf[256];
  // GNU strerror_r returns a char* that may or may not point into buf.
  const char* text = strerror_r(err, buf, sizeof buf);
  return what + ": " + text;
}

void throwSystemError(const std::string& what) {
  throw Error(Code::SystemError, systemErrorMessage(what, errno));
}

}  // namespace conflux
