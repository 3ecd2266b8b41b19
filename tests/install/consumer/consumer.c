/* One-rank all-reduce through the installed C API. */
#include <conflux/conflux.h>
#include <stdio.h>

int main(void) {
  cfxUniqueId id;
  cfxComm_t comm;
  float x[4] = {1, 2, 3, 4}, y[4];
  if (cfxGetUniqueId(&id) != cfxSuccess || cfxCommInitRank(&comm, 1, id, 0) != cfxSuccess) return 1;
  if (cfxAllReduce(x, y, 4, cfxFloat32, cfxSum, comm, NULL) != cfxSuccess) return 1;
  cfxCommDestroy(comm);
  printf("consumer (C): %g\n", y[3]);
  return y[3] == 4 ? 0 : 1;
}
