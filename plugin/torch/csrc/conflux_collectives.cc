// ProcessGroupConflux's operations: each checks its tensors on the caller's thread (a bad argument raises
// before any rank has started the call), then describes its Conflux calls as a Step for issue()
// (conflux_backend.cc). Data lands in the caller's tensors wherever Conflux can write it directly:
// list-shaped calls whose tensors are separate buffers (uneven all-gather, gather, scatter, all-to-all)
// are batches of sends and receives into each tensor; a temporary and a copy are used only where a
// collective needs one contiguous buffer (even all-gather into a list, reduce-scatter from a list).
#include <c10/util/Exception.h>

#include <algorithm>
#include <memory>
#include <numeric>

#include "conflux_backend.h"
#include "tensor_args.h"

namespace conflux_torch {
namespace {

using Work = c10::intrusive_ptr<c10d::Work>;

const at::Tensor& single(const std::vector<at::Tensor>& ts, const char* what) {
  TORCH_CHECK(ts.size() == 1, "conflux: ", what, " takes exactly one tensor per process (got ", ts.size(), ")");
  return ts.front();
}

/// One send or receive of a list-shaped operation (each tensor its own message).
struct Transfer {
  bool send;
  Buffer buf;
  int peer;
};

/// The transfers as one Conflux group: they progress together.
ProcessGroupConflux::Step transferStep(std::vector<Transfer> transfers, cfxComm_t c) {
  return groupedStep([transfers = std::move(transfers), c](FirstError& first, cfxStream_t s) {
    for (const Transfer& t : transfers) {
      first(t.send ? cfxSend(t.buf.data, t.buf.count, t.buf.type, t.peer, c, s)
                   : cfxRecv(t.buf.data, t.buf.count, t.buf.type, t.peer, c, s));
    }
  });
}

/// Whether `ts` are `n` equal-sized tensors laid out back to back in one buffer (then a collective can
/// write them directly).
bool backToBack(const std::vector<at::Tensor>& ts, size_t bytes) {
  for (size_t i = 0; i < ts.size(); ++i) {
    if (!ts[i].is_contiguous() || static_cast<size_t>(ts[i].nbytes()) != bytes) return false;
    if (static_cast<const char*>(ts[i].data_ptr()) != static_cast<const char*>(ts[0].data_ptr()) + i * bytes) return false;
  }
  return true;
}

std::vector<at::Tensor> flatCopy(const std::vector<at::Tensor>& a, const at::Tensor& b) {
  std::vector<at::Tensor> out(a);
  out.push_back(b);
  return out;
}

}  // namespace

Work ProcessGroupConflux::broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  const at::Tensor& t = single(tensors, "broadcast");
  checkPeer(static_cast<int>(opts.rootRank), "broadcast: root");
  const Buffer b = movedBuffer(t, "broadcast tensor");
  const int root = static_cast<int>(opts.rootRank);
  cfxComm_t c = comm();
  Step step{[b, root, c](cfxStream_t s) { return cfxBroadcast(b.data, b.data, b.count, b.type, root, c, s); }};
  return issue(c10d::OpType::BROADCAST, "broadcast", tensors, tensors, opts.asyncOp, opts.timeout, std::move(step));
}

Work ProcessGroupConflux::allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  const at::Tensor& t = single(tensors, "allreduce");
  TORCH_CHECK(!opts.sparseIndices.has_value(), "conflux: sparse all-reduce is not supported");
  const Buffer b = reducedBuffer(t, opts.reduceOp, "allreduce tensor");
  const ConfluxOp op = toConfluxOp(opts.reduceOp, t, handle_);
  cfxComm_t c = comm();
  Step step{[b, op, c](cfxStream_t s) {
    return cfxAllReduce(b.data, b.data, b.count, b.type, op.op, c, s);
  }};
  return issue(c10d::OpType::ALLREDUCE, "allreduce", tensors, tensors, opts.asyncOp, opts.timeout, std::move(step));
}

Work ProcessGroupConflux::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                              const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "conflux: allreduce_coalesced of no tensors");
  std::vector<Buffer> bufs;
  std::vector<ConfluxOp> ops;
  for (const at::Tensor& t : tensors) {
    bufs.push_back(reducedBuffer(t, opts.reduceOp, "allreduce_coalesced tensor"));
    ops.push_back(toConfluxOp(opts.reduceOp, t, handle_));
  }
  cfxComm_t c = comm();
  Step step = groupedStep([bufs, ops, c](FirstError& first, cfxStream_t s) {
    for (size_t i = 0; i < bufs.size(); ++i) {
      first(cfxAllReduce(bufs[i].data, bufs[i].data, bufs[i].count, bufs[i].type, ops[i].op, c, s));
    }
  });
  return issue(c10d::OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", tensors, tensors, opts.asyncOp, opts.timeout,
               std::move(step));
}

Work ProcessGroupConflux::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  const at::Tensor& t = single(tensors, "reduce");
  checkPeer(static_cast<int>(opts.rootRank), "reduce: root");
  const Buffer b = reducedBuffer(t, opts.reduceOp, "reduce tensor");
  const ConfluxOp op = toConfluxOp(opts.reduceOp, t, handle_);
  const int root = static_cast<int>(opts.rootRank);
  cfxComm_t c = comm();
  Step step{[b, op, root, c](cfxStream_t s) {
    return cfxReduce(b.data, b.data, b.count, b.type, op.op, root, c, s);
  }};
  return issue(c10d::OpType::REDUCE, "reduce", tensors, tensors, opts.asyncOp, opts.timeout, std::move(step));
}

Work ProcessGroupConflux::allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                    const c10d::AllgatherOptions& opts) {
  const at::Tensor& in = single(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1, "conflux: allgather takes one output list per process");
  std::vector<at::Tensor>& outs = outputs.front();
  TORCH_CHECK(static_cast<int>(outs.size()) == size_, "conflux: allgather needs ", size_, " output tensors, got ",
              outs.size());
  std::vector<at::Tensor> touched = flatCopy(outs, in);
  checkSameKind(touched, "allgather tensor");
  const Buffer src = movedBuffer(in, "allgather input");
  bool even = true;
  std::vector<Buffer> dst;
  for (const at::Tensor& o : outs) {
    dst.push_back(movedBuffer(o, "allgather output"));
    even &= dst.back().count == src.count;
  }
  cfxComm_t c = comm();
  const size_t bytes = static_cast<size_t>(in.nbytes());
  if (even && backToBack(outs, bytes)) {  // already one buffer: gather straight into it
    Step step{[src, d = dst.front(), c](cfxStream_t s) { return cfxAllGather(src.data, d.data, src.count, src.type, c, s); }};
    return issue(c10d::OpType::ALLGATHER, "allgather", touched, outs, opts.asyncOp, opts.timeout, std::move(step));
  }
  if (even) {  // one all-gather into a temporary, then a copy into each output
    auto flat = std::make_shared<at::Tensor>(at::empty({static_cast<int64_t>(size_) * in.numel()}, in.options()));
    const Buffer f = movedBuffer(*flat, "allgather temporary");
    Step step{[src, f, c](cfxStream_t s) { return cfxAllGather(src.data, f.data, src.count, src.type, c, s); },
              [flat, outs, n = in.numel()] {
                for (size_t r = 0; r < outs.size(); ++r) {
                  outs[r].copy_(flat->narrow(0, static_cast<int64_t>(r) * n, n).view(outs[r].sizes()));
                }
              }};
    touched.push_back(*flat);
    return issue(c10d::OpType::ALLGATHER, "allgather", touched, outs, opts.asyncOp, opts.timeout, std::move(step));
  }
  // Uneven sizes: every rank sends its input to every rank, each receive landing in its output tensor.
  TORCH_CHECK(dst[rank_].count == src.count, "conflux: allgather: output ", rank_, " (this rank's) has ",
              dst[rank_].count, " elements, the input ", src.count);
  std::vector<Transfer> transfers;
  for (int q = 0; q < size_; ++q) {
    transfers.push_back({true, src, q});
    transfers.push_back({false, dst[q], q});
  }
  return issue(c10d::OpType::ALLGATHER, "allgather (uneven)", touched, outs, opts.asyncOp, opts.timeout,
               transferStep(std::move(transfers), c));
}

Work ProcessGroupConflux::all_gather_single(at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  checkSameKind({output, input}, "all_gather_single tensor");
  const Buffer src = movedBuffer(input, "all_gather_into_tensor input");
  const Buffer dst = movedBuffer(output, "all_gather_into_tensor output");
  TORCH_CHECK(dst.count == src.count * static_cast<size_t>(size_), "conflux: all_gather_into_tensor: the output has ",
              output.numel(), " elements, which is not ", size_, " x the input's ", input.numel());
  cfxComm_t c = comm();
  Step step{[src, dst, c](cfxStream_t s) { return cfxAllGather(src.data, dst.data, src.count, src.type, c, s); }};
  return issue(c10d::OpType::_ALLGATHER_BASE, "all_gather_into_tensor", {output, input}, {output}, opts.asyncOp,
               opts.timeout, std::move(step));
}

Work ProcessGroupConflux::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                              std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  // outputs[r][j] = rank r's input j: the inputs travel as one byte buffer per rank.
  TORCH_CHECK(static_cast<int>(outputs.size()) == size_, "conflux: allgather_coalesced needs ", size_,
              " output lists, got ", outputs.size());
  int64_t total = 0;
  for (const at::Tensor& t : inputs) {
    movedBuffer(t, "allgather_coalesced input");
    total += t.nbytes();
  }
  std::vector<at::Tensor> touched(inputs), flatOuts;
  for (auto& list : outputs) {
    TORCH_CHECK(list.size() == inputs.size(), "conflux: allgather_coalesced: an output list has ", list.size(),
                " tensors for ", inputs.size(), " inputs");
    for (size_t j = 0; j < list.size(); ++j) {
      TORCH_CHECK(list[j].nbytes() == inputs[j].nbytes() && list[j].device() == inputs[j].device(),
                  "conflux: allgather_coalesced: output ", j, " does not match input ", j);
      touched.push_back(list[j]);
      flatOuts.push_back(list[j]);
    }
  }
  const auto bytes = at::TensorOptions().dtype(at::kByte).device(inputs.empty() ? at::kCPU : inputs[0].device());
  auto packed = std::make_shared<at::Tensor>(at::empty({total}, bytes));
  auto gathered = std::make_shared<at::Tensor>(at::empty({total * size_}, bytes));
  touched.push_back(*packed);
  touched.push_back(*gathered);
  cfxComm_t c = comm();
  Step step{[p = *packed, g = *gathered, total, c](cfxStream_t s) {
              return cfxAllGather(p.data_ptr(), g.data_ptr(), static_cast<size_t>(total), cfxUint8, c, s);
            },
            [gathered, outputs, total] {
              for (size_t r = 0; r < outputs.size(); ++r) {
                int64_t off = static_cast<int64_t>(r) * total;
                for (const at::Tensor& o : outputs[r]) {
                  o.view({-1}).view(at::kByte).copy_(gathered->narrow(0, off, o.nbytes()));
                  off += o.nbytes();
                }
              }
            }};
  step.before = [packed, inputs] {  // in queue order: after the calls queued earlier wrote the inputs
    int64_t at = 0;
    for (const at::Tensor& t : inputs) {
      packed->narrow(0, at, t.nbytes()).copy_(t.contiguous().view({-1}).view(at::kByte));
      at += t.nbytes();
    }
  };
  return issue(c10d::OpType::ALLGATHER_COALESCED, "allgather_coalesced", touched, flatOuts, opts.asyncOp, opts.timeout,
               std::move(step));
}

Work ProcessGroupConflux::all_gather_single_coalesced(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                                      const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "conflux: all_gather_into_tensor_coalesced: ", outputs.size(),
              " outputs for ", inputs.size(), " inputs");
  std::vector<std::pair<Buffer, Buffer>> pairs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Buffer src = movedBuffer(inputs[i], "all_gather_into_tensor_coalesced input");
    const Buffer dst = movedBuffer(outputs[i], "all_gather_into_tensor_coalesced output");
    TORCH_CHECK(dst.count == src.count * static_cast<size_t>(size_), "conflux: all_gather_into_tensor_coalesced: output ",
                i, " is not ", size_, " x input ", i);
    pairs.emplace_back(src, dst);
  }
  cfxComm_t c = comm();
  Step step = groupedStep([pairs, c](FirstError& first, cfxStream_t s) {
    for (const auto& [src, dst] : pairs) first(cfxAllGather(src.data, dst.data, src.count, src.type, c, s));
  });
  std::vector<at::Tensor> touched(outputs);
  touched.insert(touched.end(), inputs.begin(), inputs.end());
  return issue(c10d::OpType::ALLGATHER_INTO_TENSOR_COALESCED, "all_gather_into_tensor_coalesced", touched, outputs,
               opts.asyncOp, opts.timeout, std::move(step));
}

Work ProcessGroupConflux::gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                 const c10d::GatherOptions& opts) {
  const at::Tensor& in = single(inputs, "gather");
  const int root = static_cast<int>(opts.rootRank);
  checkPeer(root, "gather: root");
  const Buffer src = movedBuffer(in, "gather input");
  std::vector<Transfer> transfers{{true, src, root}};
  std::vector<at::Tensor> touched(inputs), outs;
  if (rank_ == root) {
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_, "conflux: gather needs ", size_,
                " output tensors on the root");
    outs = outputs[0];
    for (int q = 0; q < size_; ++q) {
      transfers.push_back({false, movedBuffer(outs[q], "gather output"), q});
      TORCH_CHECK(transfers.back().buf.count == src.count && outs[q].scalar_type() == in.scalar_type(),
                  "conflux: gather: every output must match the input's size and dtype");
      touched.push_back(outs[q]);
    }
  } else {
    TORCH_CHECK(outputs.empty() || outputs[0].empty(), "conflux: gather: only the root passes output tensors");
  }
  return issue(c10d::OpType::GATHER, "gather", touched, outs, opts.asyncOp, opts.timeout,
               transferStep(std::move(transfers), comm()));
}

Work ProcessGroupConflux::gather_single(at::Tensor& output, at::Tensor& input, const c10d::GatherOptions& opts) {
  const int root = static_cast<int>(opts.rootRank);
  checkPeer(root, "gather: root");
  const Buffer src = movedBuffer(input, "gather input");
  Buffer dst;
  std::vector<at::Tensor> touched{input};
  if (rank_ == root) {
    dst = movedBuffer(output, "gather output");
    TORCH_CHECK(dst.count == src.count * static_cast<size_t>(size_) && output.scalar_type() == input.scalar_type(),
                "conflux: gather into one tensor: the output must hold ", size_, " inputs of the same dtype");
    touched.push_back(output);
  }
  cfxComm_t c = comm();
  Step step{[src, dst, root, c](cfxStream_t s) { return cfxGather(src.data, dst.data, src.count, src.type, root, c, s); }};
  return issue(c10d::OpType::GATHER, "gather", touched, rank_ == root ? std::vector<at::Tensor>{output} : std::vector<at::Tensor>{},
               opts.asyncOp, opts.timeout, std::move(step));
}

Work ProcessGroupConflux::scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                  const c10d::ScatterOptions& opts) {
  const at::Tensor& out = single(outputs, "scatter");
  const int root = static_cast<int>(opts.rootRank);
  checkPeer(root, "scatter: root");
  const Buffer dst = movedBuffer(out, "scatter output");
  std::vector<Transfer> transfers;
  std::vector<at::Tensor> touched(outputs);
  if (rank_ == root) {
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_, "conflux: scatter needs ", size_,
                " input tensors on the root");
    for (int q = 0; q < size_; ++q) {
      const at::Tensor& t = inputs[0][q];
      transfers.push_back({true, movedBuffer(t, "scatter input"), q});
      TORCH_CHECK(transfers.back().buf.count == dst.count && t.scalar_type() == out.scalar_type(),
                  "conflux: scatter: every input must match the output's size and dtype");
      touched.push_back(t);
    }
  } else {
    TORCH_CHECK(inputs.empty() || inputs[0].empty(), "conflux: scatter: only the root passes input tensors");
  }
  transfers.push_back({false, dst, root});
  return issue(c10d::OpType::SCATTER, "scatter", touched, outputs, opts.asyncOp, opts.timeout,
               transferStep(std::move(transfers), comm()));
}

Work ProcessGroupConflux::reduce_scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ReduceScatterOptions& opts) {
  const at::Tensor& out = single(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_, "conflux: reduce_scatter needs ",
              size_, " input tensors");
  const std::vector<at::Tensor>& ins = inputs[0];
  std::vector<at::Tensor> touched = flatCopy(ins, out);
  checkSameKind(touched, "reduce_scatter tensor");
  const Buffer dst = reducedBuffer(out, opts.reduceOp, "reduce_scatter output");
  std::vector<Buffer> src;
  bool even = true;
  for (const at::Tensor& t : ins) {
    src.push_back(reducedBuffer(t, opts.reduceOp, "reduce_scatter input"));
    even &= src.back().count == dst.count;
  }
  TORCH_CHECK(src[rank_].count == dst.count, "conflux: reduce_scatter: input ", rank_, " (this rank's block) has ",
              ins[rank_].numel(), " elements, the output ", out.numel());
  const ConfluxOp op = toConfluxOp(opts.reduceOp, out, handle_);
  cfxComm_t c = comm();
  if (even) {
    // One call on the inputs as one buffer: they are one already (and the output lies apart from it, or
    // is this rank's block: Conflux's in-place form), or are packed into one right before the call (in
    // queue order, on the caller's stream for CUDA). The step holds the packed tensor until it is over.
    const size_t bytes = static_cast<size_t>(ins[0].nbytes());
    const char* base = static_cast<const char*>(ins[0].data_ptr());
    const char* o = static_cast<const char*>(out.data_ptr());
    const bool apart = o == base + static_cast<size_t>(rank_) * bytes || o + out.nbytes() <= base ||
                       o >= base + static_cast<size_t>(size_) * bytes;
    const bool direct = apart && backToBack(ins, bytes);
    const at::Tensor packed = direct ? ins[0] : at::empty({static_cast<int64_t>(ins.size()) * ins[0].numel()},
                                                          ins[0].options());
    touched.push_back(packed);
    Step step{[packed, dst, op, c](cfxStream_t s) {
      return cfxReduceScatter(packed.data_ptr(), dst.data, dst.count, dst.type, op.op, c, s);
    }};
    if (!direct) {
      step.before = [packed, ins] {
        const int64_t n = ins[0].numel();
        for (size_t q = 0; q < ins.size(); ++q) packed.narrow(0, static_cast<int64_t>(q) * n, n).copy_(ins[q].view({-1}));
      };
    }
    return issue(c10d::OpType::REDUCE_SCATTER, "reduce_scatter", touched, outputs, opts.asyncOp, opts.timeout,
                 std::move(step));
  }
  // Uneven blocks: one reduce to each rank, in rank order.
  Step step = groupedStep([src, dst, op, me = rank_, c](FirstError& first, cfxStream_t s) {
    for (int q = 0; q < static_cast<int>(src.size()); ++q) {
      first(cfxReduce(src[q].data, q == me ? dst.data : nullptr, src[q].count, src[q].type, op.op, q, c, s));
    }
  });
  return issue(c10d::OpType::REDUCE_SCATTER, "reduce_scatter (uneven)", touched, outputs, opts.asyncOp, opts.timeout,
               std::move(step));
}

Work ProcessGroupConflux::reduce_scatter_single(at::Tensor& output, at::Tensor& input,
                                                const c10d::ReduceScatterOptions& opts) {
  checkSameKind({output, input}, "reduce_scatter_tensor tensor");
  const Buffer src = reducedBuffer(input, opts.reduceOp, "reduce_scatter_tensor input");
  const Buffer dst = reducedBuffer(output, opts.reduceOp, "reduce_scatter_tensor output");
  TORCH_CHECK(src.count == dst.count * static_cast<size_t>(size_), "conflux: reduce_scatter_tensor: the input has ",
              input.numel(), " elements, which is not ", size_, " x the output's ", output.numel());
  const ConfluxOp op = toConfluxOp(opts.reduceOp, output, handle_);
  cfxComm_t c = comm();
  Step step{[src, dst, op, c](cfxStream_t s) {
    return cfxReduceScatter(src.data, dst.data, dst.count, dst.type, op.op, c, s);
  }};
  return issue(c10d::OpType::_REDUCE_SCATTER_BASE, "reduce_scatter_tensor", {output, input}, {output}, opts.asyncOp,
               opts.timeout, std::move(step));
}

Work ProcessGroupConflux::reduce_scatter_single_coalesced(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "conflux: reduce_scatter_tensor_coalesced: ", outputs.size(),
              " outputs for ", inputs.size(), " inputs");
  struct One {
    Buffer src, dst;
    ConfluxOp op;
  };
  std::vector<One> calls;
  for (size_t i = 0; i < inputs.size(); ++i) {
    One o{reducedBuffer(inputs[i], opts.reduceOp, "reduce_scatter_tensor_coalesced input"),
          reducedBuffer(outputs[i], opts.reduceOp, "reduce_scatter_tensor_coalesced output"), {}};
    TORCH_CHECK(o.src.count == o.dst.count * static_cast<size_t>(size_), "conflux: reduce_scatter_tensor_coalesced: input ",
                i, " is not ", size_, " x output ", i);
    o.op = toConfluxOp(opts.reduceOp, outputs[i], handle_);
    calls.push_back(o);
  }
  cfxComm_t c = comm();
  Step step = groupedStep([calls, c](FirstError& first, cfxStream_t s) {
    for (const One& o : calls) first(cfxReduceScatter(o.src.data, o.dst.data, o.dst.count, o.dst.type, o.op.op, c, s));
  });
  std::vector<at::Tensor> touched(outputs);
  touched.insert(touched.end(), inputs.begin(), inputs.end());
  return issue(c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED, "reduce_scatter_tensor_coalesced", touched, outputs,
               opts.asyncOp, opts.timeout, std::move(step));
}

Work ProcessGroupConflux::all_to_all_single(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& outputSplits,
                                            std::vector<int64_t>& inputSplits, const c10d::AllToAllOptions& opts) {
  checkSameKind({output, input}, "all_to_all_single tensor");
  const Buffer src = movedBuffer(input, "all_to_all_single input");
  const Buffer dst = movedBuffer(output, "all_to_all_single output");
  cfxComm_t c = comm();
  std::vector<at::Tensor> touched{output, input};
  // Conflux moves blocks out of a buffer distinct from the destination: in place goes through a copy,
  // which the step holds until the call is over.
  at::Tensor source = input;
  Buffer from = src;
  std::function<void()> copyIn;
  if (input.numel() > 0 && input.data_ptr() == output.data_ptr()) {
    source = at::empty_like(input);
    from = movedBuffer(source, "all_to_all_single input");
    touched.push_back(source);
    copyIn = [source, input]() mutable { source.copy_(input); };  // in queue order, right before the call
  }
  if (outputSplits.empty() && inputSplits.empty()) {
    TORCH_CHECK(src.count % static_cast<size_t>(size_) == 0 && dst.count == src.count,
                "conflux: all_to_all_single: input and output must have equal sizes divisible by the group size ", size_);
    Step step{[source, from, dst, n = size_, c](cfxStream_t s) {
      return cfxAllToAll(from.data, dst.data, from.count / static_cast<size_t>(n), from.type, c, s);
    }};
    step.before = copyIn;
    return issue(c10d::OpType::ALLTOALL_BASE, "all_to_all_single", touched, {output}, opts.asyncOp, opts.timeout,
                 std::move(step));
  }
  // Per-peer rows of dim 0: element counts and displacements in Conflux elements.
  auto unitsPerRow = [](const at::Tensor& t, const Buffer& b) -> size_t {
    if (t.dim() == 0 || t.size(0) == 0) return 0;
    return b.count / static_cast<size_t>(t.size(0));
  };
  auto countsOf = [&](const std::vector<int64_t>& splits, const at::Tensor& t, const Buffer& b, const char* what) {
    std::vector<size_t> counts(static_cast<size_t>(size_));
    if (splits.empty()) {
      TORCH_CHECK(t.dim() > 0 && t.size(0) % size_ == 0, "conflux: all_to_all_single: ", what, " dim 0 (",
                  t.dim() > 0 ? t.size(0) : 0, ") does not split evenly over ", size_, " ranks");
      std::fill(counts.begin(), counts.end(), static_cast<size_t>(t.size(0) / size_) * unitsPerRow(t, b));
      return counts;
    }
    TORCH_CHECK(static_cast<int>(splits.size()) == size_, "conflux: all_to_all_single: ", what, " splits have ",
                splits.size(), " entries for ", size_, " ranks");
    int64_t rows = 0;
    for (size_t q = 0; q < splits.size(); ++q) {
      TORCH_CHECK(splits[q] >= 0, "conflux: all_to_all_single: ", what, " split ", q, " is negative");
      rows += splits[q];
      counts[q] = static_cast<size_t>(splits[q]) * unitsPerRow(t, b);
    }
    TORCH_CHECK(rows == (t.dim() > 0 ? t.size(0) : 0), "conflux: all_to_all_single: ", what, " splits add up to ", rows,
                " rows, the tensor has ", t.dim() > 0 ? t.size(0) : 0);
    return counts;
  };
  const std::vector<size_t> sc = countsOf(inputSplits, input, src, "input");
  const std::vector<size_t> rc = countsOf(outputSplits, output, dst, "output");
  std::vector<size_t> sd(sc.size()), rd(rc.size());
  std::exclusive_scan(sc.begin(), sc.end(), sd.begin(), size_t{0});
  std::exclusive_scan(rc.begin(), rc.end(), rd.begin(), size_t{0});
  Step step{[source, from, dst, sc, sd, rc, rd, c](cfxStream_t s) {
    return cfxAllToAllv(from.data, sc.data(), sd.data(), dst.data, rc.data(), rd.data(), from.type, c, s);
  }};
  step.before = std::move(copyIn);
  return issue(c10d::OpType::ALLTOALL_BASE, "all_to_all_single", touched, {output}, opts.asyncOp, opts.timeout,
               std::move(step));
}

Work ProcessGroupConflux::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                   const c10d::AllToAllOptions& opts) {
  TORCH_CHECK(static_cast<int>(outputs.size()) == size_ && static_cast<int>(inputs.size()) == size_,
              "conflux: alltoall needs ", size_, " input and output tensors");
  std::vector<at::Tensor> touched(outputs);
  touched.insert(touched.end(), inputs.begin(), inputs.end());
  checkSameKind(touched, "alltoall tensor");
  std::vector<Transfer> transfers;
  for (int q = 0; q < size_; ++q) {
    transfers.push_back({true, movedBuffer(inputs[q], "alltoall input"), q});
    transfers.push_back({false, movedBuffer(outputs[q], "alltoall output"), q});
    TORCH_CHECK(inputs[q].numel() == 0 || outputs[q].numel() == 0 || inputs[q].data_ptr() != outputs[q].data_ptr(),
                "conflux: alltoall: input ", q, " and output ", q, " are the same tensor (in place is not supported)");
  }
  return issue(c10d::OpType::ALLTOALL, "alltoall", touched, outputs, opts.asyncOp, opts.timeout,
               transferStep(std::move(transfers), comm()));
}

Work ProcessGroupConflux::send(std::vector<at::Tensor>& tensors, int dstRank, int /*tag*/) {
  const at::Tensor& t = single(tensors, "send");
  checkPeer(dstRank, "send: destination");
  const Buffer b = movedBuffer(t, "send tensor");
  cfxComm_t c = comm();
  Step step{[b, dstRank, c](cfxStream_t s) { return cfxSend(b.data, b.count, b.type, dstRank, c, s); }};
  return issue(c10d::OpType::SEND, "send", tensors, tensors, /*asyncOp=*/true, c10d::kUnsetTimeout, std::move(step),
               /*p2p=*/true);
}

Work ProcessGroupConflux::recv(std::vector<at::Tensor>& tensors, int srcRank, int /*tag*/) {
  const at::Tensor& t = single(tensors, "recv");
  checkPeer(srcRank, "recv: source");
  const Buffer b = movedBuffer(t, "recv tensor");
  cfxComm_t c = comm();
  Step step{[b, srcRank, c](cfxStream_t s) { return cfxRecv(b.data, b.count, b.type, srcRank, c, s); }};
  return issue(c10d::OpType::RECV, "recv", tensors, tensors, /*asyncOp=*/true, c10d::kUnsetTimeout, std::move(step),
               /*p2p=*/true);
}

Work ProcessGroupConflux::recvAnysource(std::vector<at::Tensor>& /*tensors*/, int /*tag*/) {
  TORCH_CHECK(false, "conflux: receiving from any source is not supported: Conflux matches each message by its "
                     "sender; pass src= to torch.distributed.recv/irecv");
}

Work ProcessGroupConflux::barrier(const c10d::BarrierOptions& opts) {
  // A one-byte all-reduce: every rank has issued everything before it (the queue keeps the order), and
  // none returns before all arrived.
  auto token = std::make_shared<uint8_t>(0);
  cfxComm_t c = comm();
  Step step{[token, c](cfxStream_t) { return cfxAllReduce(token.get(), token.get(), 1, cfxUint8, cfxMax, c, nullptr); }};
  return issue(c10d::OpType::BARRIER, "barrier", {}, {}, opts.asyncOp, opts.timeout, std::move(step));
}

}  // namespace conflux_torch
