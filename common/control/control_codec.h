// Encoding and decoding of control-plane messages (common/control/control.capnp)
// shared by the coordinator and ClusterClient. Internal to the control plane.
#pragma once

#include <capnp/message.h>
#include <capnp/serialize.h>

#include <memory>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "common/control/cluster_map.h"
#include "common/control/control.capnp.h"

namespace pshard::control_codec {

// Serializes `builder` into one ZeroMQ frame.
zmq::message_t encode(capnp::MessageBuilder& builder);

// A decoded control message. The frame is copied into word-aligned memory
// (control messages are small). Throws pshard::Error naming `peer` when the
// frame is not a valid Cap'n Proto message.
class Decoded {
 public:
  Decoded(const zmq::message_t& frame, const std::string& peer);
  control::ControlMessage::Reader root() const { return root_; }

 private:
  std::vector<capnp::word> words_;
  std::unique_ptr<capnp::FlatArrayMessageReader> reader_;
  control::ControlMessage::Reader root_;
};

wire::Role to_wire(NodeRole role);
NodeRole from_wire(wire::Role role);
void fill_node(const NodeInfo& info, control::Node::Builder out);
NodeInfo read_node(control::Node::Reader in);
// "worker 2 (host a, pid 7)": how logs and messages name a node.
std::string describe(const NodeInfo& node);

}  // namespace pshard::control_codec
