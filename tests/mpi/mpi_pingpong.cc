// A two-rank MPI ping-pong that checks every byte: rank 0 sends a message
// whose contents depend on the size and the round, rank 1 checks it and
// answers with the bytes transformed, rank 0 checks the answer. Used by
// tests/conformance/mpi.sh (correctness over each transport) and by
// bench/ (the 1 MiB round trip).
//
//   mpi_pingpong [--iters N] [--warmup N] [SIZE...]
// Prints one line per size: "size <bytes> iters <n> median_us <half round trip>".
// Exit status 0 when every message arrived intact, 1 otherwise.
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

uint8_t pattern(size_t i, uint64_t size, uint64_t round) {
  return static_cast<uint8_t>((i * 131 + size * 7 + round * 29) >> 3);
}

void fill(std::vector<uint8_t>& buf, uint64_t size, uint64_t round, uint8_t flip) {
  for (size_t i = 0; i < size; ++i) buf[i] = pattern(i, size, round) ^ flip;
}

// Index of the first wrong byte, or size when all are right.
size_t first_mismatch(const std::vector<uint8_t>& buf, uint64_t size, uint64_t round, uint8_t flip) {
  for (size_t i = 0; i < size; ++i)
    if (buf[i] != (pattern(i, size, round) ^ flip)) return i;
  return size;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (ranks != 2) {
    if (rank == 0) std::fprintf(stderr, "mpi_pingpong: needs exactly 2 ranks, got %d\n", ranks);
    MPI_Finalize();
    return 2;
  }
  uint64_t iters = 200, warmup = 10;
  std::vector<uint64_t> sizes;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--iters" && i + 1 < argc) {
      iters = std::strtoull(argv[++i], nullptr, 0);
    } else if (a == "--warmup" && i + 1 < argc) {
      warmup = std::strtoull(argv[++i], nullptr, 0);
    } else {
      sizes.push_back(std::strtoull(a.c_str(), nullptr, 0));
    }
  }
  if (sizes.empty()) sizes = {1, 8, 4096, 65536, 1 << 20};
  const uint64_t largest = *std::max_element(sizes.begin(), sizes.end());
  std::vector<uint8_t> buf(std::max<uint64_t>(largest, 1));
  int bad = 0;
  constexpr uint8_t kAnswerFlip = 0xA5;
  for (uint64_t size : sizes) {
    std::vector<double> us;
    for (uint64_t round = 0; round < warmup + iters && !bad; ++round) {
      MPI_Barrier(MPI_COMM_WORLD);
      const int n = static_cast<int>(size);
      if (rank == 0) {
        fill(buf, size, round, 0);
        const double t0 = MPI_Wtime();
        MPI_Send(buf.data(), n, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
        MPI_Recv(buf.data(), n, MPI_BYTE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        const double t1 = MPI_Wtime();
        if (round >= warmup) us.push_back((t1 - t0) * 1e6 / 2);
        if (size_t at = first_mismatch(buf, size, round, kAnswerFlip); at != size) {
          std::fprintf(stderr, "mpi_pingpong: rank 0: answer of %llu B, round %llu: byte %zu wrong\n",
                       static_cast<unsigned long long>(size), static_cast<unsigned long long>(round), at);
          bad = 1;
        }
      } else {
        MPI_Recv(buf.data(), n, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (size_t at = first_mismatch(buf, size, round, 0); at != size) {
          std::fprintf(stderr, "mpi_pingpong: rank 1: message of %llu B, round %llu: byte %zu wrong\n",
                       static_cast<unsigned long long>(size), static_cast<unsigned long long>(round), at);
          bad = 1;
        }
        fill(buf, size, round, kAnswerFlip);
        MPI_Send(buf.data(), n, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
      }
      // Both ranks stop together on a mismatch.
      MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    }
    if (rank == 0 && !us.empty()) {
      std::nth_element(us.begin(), us.begin() + static_cast<long>(us.size() / 2), us.end());
      std::printf("size %llu iters %zu median_us %.3f\n", static_cast<unsigned long long>(size), us.size(),
                  us[us.size() / 2]);
      std::fflush(stdout);
    }
    if (bad) break;
  }
  MPI_Finalize();
  if (rank == 0) std::printf("%s\n", bad ? "FAILED" : "PASSED");
  return bad ? 1 : 0;
}
