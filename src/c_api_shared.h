// What the C ABI's source files share: the cfxComm behind a handle, and the one place where exceptions and
// Status become a cfxResult_t and the calling thread's last error (guarded).
#pragma once

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "conflux/conflux.h"
#include "core/error.h"
#include "src/communicator.h"

namespace conflux {
/// One cfxCommRegister: the handle is the address of this record.
struct Registration {
  void* buff = nullptr;
  size_t size = 0;
};

/// One op made by cfxRedOpCreatePreMulSum: its handle is cfxNumOps + its index in cfxComm::premulOps.
struct PremulOp {
  bool inUse = false;
  DataType dtype = DataType::Float32;
  uint64_t bits = 0;             ///< cfxScalarHostImmediate: the value
  const void* ptr = nullptr;     ///< cfxScalarDevice: where the value is read at each call
};
}  // namespace conflux

struct cfxComm {
  std::unique_ptr<conflux::CommunicatorImpl> impl;
  std::mutex registrationsMutex;
  std::map<void*, std::unique_ptr<conflux::Registration>> registrations;  // by handle
  std::mutex opsMutex;
  std::vector<conflux::PremulOp> premulOps;  // slots; destroyed ones are reused
};

namespace conflux::capi {

/// The calling thread's last error message (cfxGetLastError).
std::string& lastError();

/// Records a failed `s` of API function `fn` as the thread's last error (naming `comm` when it has a name)
/// and returns its code; cfxSuccess for Ok.
cfxResult_t record(const char* fn, const Status& s, const cfxComm* comm = nullptr);

/// Runs `body` and converts its Status or exception into a result code and the last-error message
/// (which names `comm` when it has a name).
template <class F>
cfxResult_t guarded(const char* fn, F&& body, const cfxComm* comm = nullptr) {
  try {
    return record(fn, body(), comm);
  } catch (const Error& e) {
    return record(fn, e.status(), comm);
  } catch (const std::bad_alloc&) {
    return record(fn, Status(Code::SystemError, "out of memory"), comm);
  } catch (const std::exception& e) {
    return record(fn, Status(Code::InternalError, e.what()), comm);
  }
}

/// An enum argument's value read as the int it is passed as (no enum load: any value is well defined).
template <class E>
int rawEnum(const E& e) {
  static_assert(sizeof(E) == sizeof(int), "C enums are int-sized");
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

inline Status checkComm(const cfxComm* comm) {
  if (comm == nullptr || !comm->impl) return Status(Code::InvalidArgument, "comm is NULL");
  return Status::ok();
}

}  // namespace conflux::capi
