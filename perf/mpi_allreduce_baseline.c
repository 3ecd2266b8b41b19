/* mpi-allreduce-baseline: the same measurement as conflux-allreduce-demo with MPI_Allreduce, so the two
 * can be compared side by side (float32 sum, out of place, slowest rank's mean time per call).
 *   mpirun -np N mpi-allreduce-baseline [-b MIN] [-e MAX] [-f FACTOR] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static size_t parse_size(const char* s) {
  char* end = NULL;
  double v = strtod(s, &end);
  if (*end == 'K' || *end == 'k') v *= 1024;
  if (*end == 'M' || *end == 'm') v *= 1024 * 1024;
  if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024 * 1024;
  return (size_t)v;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  size_t minBytes = 8, maxBytes = 64u << 20;
  int factor = 4;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (argv[i][1] == 'b') minBytes = parse_size(argv[i + 1]);
    if (argv[i][1] == 'e') maxBytes = parse_size(argv[i + 1]);
    if (argv[i][1] == 'f') factor = atoi(argv[i + 1]);
  }
  float* send = malloc(maxBytes);
  float* recv = malloc(maxBytes);
  for (size_t i = 0; i < maxBytes / 4; ++i) send[i] = (float)(rank + 1);
  if (rank == 0) printf("# mpi-allreduce-baseline: %d ranks, float32 sum\n#\n# %12s %12s %10s %10s %10s\n", n,
                        "size(B)", "count", "time(us)", "algbw", "busbw");
  for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= (size_t)factor) {
    int count = (int)(bytes / 4);
    size_t it = (256u << 20) / bytes;
    int iters = it < 5 ? 5 : it > 2000 ? 2000 : (int)it;
    for (int w = 0; w < 5; ++w) MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int k = 0; k < iters; ++k) MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double us = (MPI_Wtime() - t0) * 1e6 / iters, maxUs;
    MPI_Allreduce(&us, &maxUs, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) {
      double algbw = (double)bytes / maxUs / 1e3;
      printf("  %12zu %12d %10.2f %10.2f %10.2f\n", bytes, count, maxUs, algbw, algbw * 2.0 * (n - 1) / n);
      fflush(stdout);
    }
  }
  free(send);
  free(recv);
  MPI_Finalize();
  return 0;
}
