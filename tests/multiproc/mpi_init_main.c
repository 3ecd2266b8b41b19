/* Run under mpirun: builds one communicator from MPI_COMM_WORLD (conflux_mpi.h) and one from the Open MPI
 * environment (cfxCommInitFromEnv), checks that both agree with MPI about ranks and that an all-reduce
 * on each matches MPI_Allreduce. Exits non-zero on any mismatch. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "conflux/conflux_mpi.h"

static int check(cfxComm_t comm, int rank, int size, const char* how) {
  int r = -1, n = -1, bad = 0;
  cfxCommUserRank(comm, &r);
  cfxCommCount(comm, &n);
  if (r != rank || n != size) {
    fprintf(stderr, "%s: rank %d/%d but MPI says %d/%d\n", how, r, n, rank, size);
    bad = 1;
  }
  double in[1000], out[1000], ref[1000];
  for (int i = 0; i < 1000; ++i) in[i] = rank * 0.5 + i;
  if (cfxAllReduce(in, out, 1000, cfxFloat64, cfxSum, comm, NULL) != cfxSuccess) {
    fprintf(stderr, "%s: allreduce failed: %s\n", how, cfxGetLastError(NULL));
    return 1;
  }
  MPI_Allreduce(in, ref, 1000, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  for (int i = 0; i < 1000; ++i) {
    if (out[i] != ref[i]) {
      fprintf(stderr, "%s: element %d: %g vs MPI %g\n", how, i, out[i], ref[i]);
      bad = 1;
      break;
    }
  }
  return bad;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size, bad = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  cfxComm_t a, b;
  if (cfxCommInitFromMpi(&a, MPI_COMM_WORLD) != cfxSuccess) {
    fprintf(stderr, "cfxCommInitFromMpi: %s\n", cfxGetLastError(NULL));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  bad |= check(a, rank, size, "from MPI_Comm");
  if (cfxCommInitFromEnv(&b) != cfxSuccess) {
    fprintf(stderr, "cfxCommInitFromEnv: %s\n", cfxGetLastError(NULL));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  bad |= check(b, rank, size, "from environment");
  cfxCommDestroy(a);
  cfxCommDestroy(b);
  int anyBad = 0;
  MPI_Allreduce(&bad, &anyBad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) printf("%s\n", anyBad ? "FAILED" : "mpi init: ok");
  MPI_Finalize();
  return anyBad;
}
