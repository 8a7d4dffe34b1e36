// Encoding and decoding of control-plane messages.
#include "common/control/control_codec.h"

#include <cstring>

#include "common/error.h"

namespace pshard::control_codec {

zmq::message_t encode(capnp::MessageBuilder& builder) {
  kj::Array<capnp::word> words = capnp::messageToFlatArray(builder);
  auto bytes = words.asBytes();
  return zmq::message_t(bytes.begin(), bytes.size());
}

Decoded::Decoded(const zmq::message_t& frame, const std::string& peer) {
  if (frame.size() == 0 || frame.size() % sizeof(capnp::word) != 0) {
    throw Error("control message from " + peer + ": frame of " + std::to_string(frame.size()) +
                " bytes is not a Cap'n Proto message");
  }
  // Not resize(): with clang, capnp::word is not movable.
  words_ = std::vector<capnp::word>(frame.size() / sizeof(capnp::word));
  std::memcpy(words_.data(), frame.data(), frame.size());
  try {
    capnp::ReaderOptions options;
    options.traversalLimitInWords = 1 << 20;  // control messages are small; refuse anything huge
    reader_ = std::make_unique<capnp::FlatArrayMessageReader>(kj::arrayPtr(words_.data(), words_.size()), options);
    root_ = reader_->getRoot<control::ControlMessage>();
    (void)root_.which();
  } catch (const kj::Exception& e) {
    throw Error("control message from " + peer + ": malformed: " + e.getDescription().cStr());
  }
}

wire::Role to_wire(NodeRole role) {
  switch (role) {
    case NodeRole::kCoordinator: return wire::Role::COORDINATOR;
    case NodeRole::kServer: return wire::Role::SERVER;
    case NodeRole::kWorker: return wire::Role::WORKER;
  }
  return wire::Role::WORKER;
}

NodeRole from_wire(wire::Role role) {
  switch (role) {
    case wire::Role::COORDINATOR: return NodeRole::kCoordinator;
    case wire::Role::SERVER: return NodeRole::kServer;
    case wire::Role::WORKER: return NodeRole::kWorker;
  }
  throw Error("control message: unknown role " + std::to_string(static_cast<int>(role)));
}

void fill_node(const NodeInfo& info, control::Node::Builder out) {
  out.setRole(to_wire(info.role));
  out.setRank(info.rank);
  out.setEndpoint(info.endpoint);
  out.setHost(info.host);
  out.setPid(info.pid);
  out.setLocality(info.locality);
}

NodeInfo read_node(control::Node::Reader in) {
  NodeInfo n;
  n.role = from_wire(in.getRole());
  n.rank = in.getRank();
  n.endpoint = in.getEndpoint().cStr();
  n.host = in.getHost().cStr();
  n.pid = in.getPid();
  n.locality = in.getLocality().cStr();
  return n;
}

std::string describe(const NodeInfo& node) {
  return std::string(role_name(node.role)) + " " + std::to_string(node.rank) + " (host " + node.host + ", pid " +
         std::to_string(node.pid) + ")";
}

}  // namespace pshard::control_codec
