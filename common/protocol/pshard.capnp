# The pshard wire protocol: every message header that crosses a ZeroMQ socket.
#
# A message is one Cap'n Proto frame holding a `Header`, followed by zero or
# more raw payload frames (tensor bytes, never copied into the header).
# Versioning: add fields at the end of a struct with the next ordinal; never
# renumber or change the type of an existing field.
@0x90a67fa7ef1961e4;

$import "/capnp/c++.capnp".namespace("pshard::wire");

# Which process a message comes from.
enum Role {
  coordinator @0;
  server @1;
  worker @2;
}

# Element type of a payload frame.
enum DType {
  float32 @0;
  float16 @1;
  bfloat16 @2;
  int8 @3;
}

# What a message is. Requests and their replies share one request id.
enum MessageType {
  invalid @0;       # never sent; the default value of an unset field
  ping @1;          # liveness/latency probe; answered with pong
  pong @2;
}

# One key's payload description: the frame with index `frame` (counting
# payload frames from 0, after the header) holds its bytes.
struct KeyRef {
  tensor @0 :UInt32;     # tensor id: index in the model's stable tensor list
  slice @1 :UInt32;      # slice index within the tensor
  offset @2 :UInt64;     # first element of the slice within the tensor (elements)
  length @3 :UInt64;     # number of elements in this payload
  dtype @4 :DType;       # element type of the payload frame
}

# The header frame of every message.
struct Header {
  type @0 :MessageType;
  requestId @1 :UInt64;  # chosen by the requester; echoed in the reply
  jobToken @2 :Text;     # per-job secret; a mismatch is refused
  senderRole @3 :Role;
  senderRank @4 :UInt32; # rank within the sender's role
  keys @5 :List(KeyRef); # one entry per payload frame, in frame order
  step @6 :Int64;        # training step / clock the message refers to
}
