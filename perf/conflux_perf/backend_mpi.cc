// conflux-perf: the MPI backend (the baseline), on the same buffers and sizes as Conflux.
// Mapping: MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block, MPI_Bcast, MPI_Reduce, MPI_Alltoall,
// MPI_Sendrecv; in place through MPI_IN_PLACE / MPI_Sendrecv_replace. Where MPI's conventions differ
// from NCCL's, the difference is part of the measured call: out-of-place broadcast copies send to recv
// on the root first; in-place reduce-scatter leaves the block at the start of the buffer and moves it
// to the rank's block; avg is MPI_SUM followed by a division (integers: truncated quotient, as Conflux).
// half and bfloat16 are not MPI datatypes, and counts above INT_MAX do not fit MPI's int: unsupported.
#include <mpi.h>

#include <climits>
#include <cstring>
#include <stdexcept>
#include <string>

#include "backend.h"
#include "conflux/conflux_mpi.h"

#ifndef CONFLUX_PERF_MPIEXEC
#define CONFLUX_PERF_MPIEXEC "mpirun"
#endif

namespace cfxperf {

namespace {

MPI_Datatype mpiType(cfxDataType_t type) {
  switch (type) {
    case cfxInt8: return MPI_INT8_T;
    case cfxUint8: return MPI_UINT8_T;
    case cfxInt32: return MPI_INT32_T;
    case cfxUint32: return MPI_UINT32_T;
    case cfxInt64: return MPI_INT64_T;
    case cfxUint64: return MPI_UINT64_T;
    case cfxFloat32: return MPI_FLOAT;
    case cfxFloat64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;
  }
}

MPI_Op mpiOp(cfxRedOp_t op) {
  switch (op) {
    case cfxProd: return MPI_PROD;
    case cfxMax: return MPI_MAX;
    case cfxMin: return MPI_MIN;
    case cfxBand: return MPI_BAND;
    case cfxBor: return MPI_BOR;
    case cfxBxor: return MPI_BXOR;
    default: return MPI_SUM;  // sum, and avg before its division
  }
}

template <typename T>
void divideAll(void* data, size_t count, int n) {
  T* p = static_cast<T*>(data);
  for (size_t i = 0; i < count; ++i) p[i] = static_cast<T>(p[i] / static_cast<T>(n));
}

void divide(void* data, size_t count, cfxDataType_t type, int n) {
  switch (type) {
    case cfxInt8: divideAll<int8_t>(data, count, n); break;
    case cfxUint8: divideAll<uint8_t>(data, count, n); break;
    case cfxInt32: divideAll<int32_t>(data, count, n); break;
    case cfxUint32: divideAll<uint32_t>(data, count, n); break;
    case cfxInt64: divideAll<int64_t>(data, count, n); break;
    case cfxUint64: divideAll<uint64_t>(data, count, n); break;
    case cfxFloat32: divideAll<float>(data, count, n); break;
    case cfxFloat64: divideAll<double>(data, count, n); break;
    default: break;
  }
}

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw std::runtime_error(std::string(what) + " failed: " + text);
}

class MpiBackend final : public Backend {
 public:
  MpiBackend() {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &nranks_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  }
  const char* name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }

  bool supports(Coll, cfxDataType_t type, cfxRedOp_t, size_t count, std::string* why) const override {
    if (mpiType(type) == MPI_DATATYPE_NULL) {
      *why = std::string(typeName(type)) + " is not an MPI datatype";
      return false;
    }
    if (count > static_cast<size_t>(INT_MAX)) {
      *why = "count " + std::to_string(count) + " does not fit MPI's int";
      return false;
    }
    return true;
  }

  void run(Coll coll, const void* send, void* recv, size_t count, cfxDataType_t type, cfxRedOp_t op,
           int root) override {
    const int n = static_cast<int>(count);
    const MPI_Datatype dt = mpiType(type);
    const MPI_Op mop = mpiOp(op);
    const size_t bytes = count * typeSize(type);
    char* recvc = static_cast<char*>(recv);
    const char* sendc = static_cast<const char*>(send);
    switch (coll) {
      case Coll::AllReduce:
        check(MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv, n, dt, mop, comm_), "MPI_Allreduce");
        if (op == cfxAvg) divide(recv, count, type, nranks_);
        break;
      case Coll::AllGather:
        if (sendc == recvc + static_cast<size_t>(rank_) * bytes) {
          check(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, n, dt, comm_), "MPI_Allgather");
        } else {
          check(MPI_Allgather(send, n, dt, recv, n, dt, comm_), "MPI_Allgather");
        }
        break;
      case Coll::ReduceScatter:
        if (recvc == sendc + static_cast<size_t>(rank_) * bytes) {
          char* base = const_cast<char*>(sendc);
          check(MPI_Reduce_scatter_block(MPI_IN_PLACE, base, n, dt, mop, comm_), "MPI_Reduce_scatter_block");
          if (rank_ != 0 && bytes > 0) std::memmove(recvc, base, bytes);
        } else {
          check(MPI_Reduce_scatter_block(send, recv, n, dt, mop, comm_), "MPI_Reduce_scatter_block");
        }
        if (op == cfxAvg) divide(recv, count, type, nranks_);
        break;
      case Coll::Broadcast:
        if (rank_ == root && send != recv && bytes > 0) std::memcpy(recv, send, bytes);
        check(MPI_Bcast(recv, n, dt, root, comm_), "MPI_Bcast");
        break;
      case Coll::Reduce:
        if (rank_ == root) {
          check(MPI_Reduce(send == recv ? MPI_IN_PLACE : send, recv, n, dt, mop, root, comm_), "MPI_Reduce");
          if (op == cfxAvg) divide(recv, count, type, nranks_);
        } else {
          check(MPI_Reduce(send, nullptr, n, dt, mop, root, comm_), "MPI_Reduce");
        }
        break;
      case Coll::AllToAll:
        if (send == recv) {
          check(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, n, dt, comm_), "MPI_Alltoall");
        } else {
          check(MPI_Alltoall(send, n, dt, recv, n, dt, comm_), "MPI_Alltoall");
        }
        break;
      case Coll::SendRecv: {
        const int next = (rank_ + 1) % nranks_;
        const int prev = (rank_ - 1 + nranks_) % nranks_;
        if (send == recv) {
          check(MPI_Sendrecv_replace(recv, n, dt, next, 0, prev, 0, comm_, MPI_STATUS_IGNORE),
                "MPI_Sendrecv_replace");
        } else {
          check(MPI_Sendrecv(send, n, dt, next, 0, recv, n, dt, prev, 0, comm_, MPI_STATUS_IGNORE),
                "MPI_Sendrecv");
        }
        break;
      }
    }
  }

  void barrier() override { check(MPI_Barrier(comm_), "MPI_Barrier"); }

  void allreduce(double* values, int n, Combine how) override {
    MPI_Op op = how == Combine::Sum ? MPI_SUM : how == Combine::Min ? MPI_MIN : MPI_MAX;
    check(MPI_Allreduce(MPI_IN_PLACE, values, n, MPI_DOUBLE, op, comm_), "MPI_Allreduce (statistics)");
  }

  void allgather(const void* mine, void* all, size_t bytes) override {
    const int n = static_cast<int>(bytes);
    check(MPI_Allgather(mine, n, MPI_BYTE, all, n, MPI_BYTE, comm_), "MPI_Allgather (host)");
  }

 private:
  MPI_Comm comm_ = MPI_COMM_WORLD;
  int rank_ = 0;
  int nranks_ = 1;
};

}  // namespace

bool mpiAvailable() { return true; }
const char* mpiexecPath() { return CONFLUX_PERF_MPIEXEC; }

void mpiInit(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) MPI_Init(argc, argv);
}

void mpiFinalize() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void mpiAbort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

int mpiRank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int mpiSize() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

cfxResult_t confluxCommFromMpi(cfxComm_t* comm) { return cfxCommInitFromMpi(comm, MPI_COMM_WORLD); }

std::unique_ptr<Backend> makeMpiBackend() { return std::make_unique<MpiBackend>(); }

}  // namespace cfxperf
