// One-rank all-reduce through the installed C++ API.
#include <conflux/conflux.hpp>

#include <cstdio>
#include <vector>

int main() {
  conflux::Communicator comm(1, conflux::UniqueId::create(), 0);
  std::vector<double> v(10, 2.5);
  comm.allReduce(std::span<double>(v));
  std::printf("consumer (C++): %g\n", v[9]);
  return v[9] == 2.5 ? 0 : 1;
}
