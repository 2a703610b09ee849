// A single-process NCCL communicator over the first n GPUs (ncclCommInitAll), with one stream
// and one send/receive buffer pair per GPU.
#pragma once

#include "common.h"

#ifdef RACKSIM_HAVE_NCCL
#include <nccl.h>

namespace rb {

#define RB_NCCL(call)                                                                                          \
  do {                                                                                                         \
    ncclResult_t rb_nr_ = (call);                                                                              \
    if (rb_nr_ != ncclSuccess)                                                                                 \
      ::rb::throw_error(std::string(#call) + ": " + ncclGetErrorString(rb_nr_), __FILE__, __LINE__);           \
  } while (0)

enum class Coll { AllReduce, AllGather, ReduceScatter, AllToAll, SendRecv };

struct NcclWorld {
  int n = 0;
  size_t buf_bytes = 0;
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;
  std::vector<void*> send, recv;

  NcclWorld(int ngpus, size_t bytes);
  ~NcclWorld();
  NcclWorld(const NcclWorld&) = delete;
  NcclWorld& operator=(const NcclWorld&) = delete;

  // Enqueue one collective on every rank inside one group. `count` is elements per rank for
  // all_reduce and send_recv, and elements per peer chunk for the others.
  void enqueue(Coll c, size_t count, ncclDataType_t dt);
  void sync();
};

}  // namespace rb
#endif
