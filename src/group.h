// cfxGroupStart/cfxGroupEnd: calls made inside a group are queued per thread and run at the outermost end.
#pragma once

#include "core/error.h"
#include "src/communicator.h"

namespace conflux::group {

void start();
bool active();
void enqueue(CommunicatorImpl* comm, const CallArgs& call);
void enqueue(CommunicatorImpl* comm, const P2pOp& op);
/// Runs the queue: collectives in call order, then each communicator's sends and receives together.
Status end();
/// Drops queued work of a communicator being destroyed.
void forget(CommunicatorImpl* comm);

}  // namespace conflux::group
