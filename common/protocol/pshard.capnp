# The pshard wire protocol: every message header that crosses a ZeroMQ socket.
#
# A message is one Cap'n Proto frame holding a `Header`, followed by zero or
# more raw payload frames (tensor bytes, never copied into the header).
# Versioning: add fields at the end of a struct with the next ordinal; never
# renumber or change the type of an existing field.
#
# Data plane (worker DEALER -> server ROUTER; see docs/PROTOCOL.md):
#   init      keys + one payload per key (initial weights)   -> ack | error
#   push      keys + one payload per key (gradients, encoded) -> ack | error
#   pull      keys, no payload                               -> weights | error
#   pushPull  keys + one payload per key (gradients)         -> weights | error
#   ping      nothing                                        -> pong (its `step`: the server's highest slice version)
#   join      keys, no payload                               -> weights | error (a worker rejoining a sync job)
#   tableInit tables, no payload                             -> ack | error (the job's embedding tables)
#   rowPull   table, frame 0: row ids                        -> rows | error
#   rowPush   table, frame 0: row ids, frame 1: gradients    -> ack | error
#   shutdown  nothing                                        -> ack (then the server stops)
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

# How a payload frame encodes a slice's float32 values (cluster.compression for pushed gradients,
# cluster.pull_precision for pulled weights; common/compression/ has one file per encoding and
# docs/PROTOCOL.md the byte layouts). Servers decode to float32 before they aggregate.
enum Encoding {
  none @0;      # length float32 (4 bytes each)
  fp16 @1;      # length IEEE half floats (2 bytes each)
  bf16 @2;      # length bfloat16 (2 bytes each: the upper half of a float32)
  topk @3;      # k uint32 element indices (strictly increasing, < length), then k float32 values; k = bytes / 8
  randomk @4;   # as topk; the indices are a random sample instead of the largest magnitudes
  onebit @5;    # one float32 scale, then ceil(length / 8) bytes of sign bits (bit set: -scale, else +scale)
}

# What a message is. Requests and their replies share one request id.
enum MessageType {
  invalid @0;       # never sent; the default value of an unset field
  ping @1;          # liveness/latency probe; answered with pong
  pong @2;
  init @3;          # worker 0 -> server: initial weights, one payload per key; `tensors` carries the model's tensor list
  push @4;          # worker -> server: gradients of step `step`, one payload per key
  pull @5;          # worker -> server: ask for the weights of `keys` as seen by a worker at step/clock `step`; no payload
  pushPull @6;      # push of step `step`, then pull at step `step` + 1, answered with the weights
  ack @7;           # server -> worker: init/push/shutdown accepted; no payload
  weights @8;       # server -> worker: reply to pull/pushPull, one float32 payload per key, same key order
  error @9;         # server -> worker: the request was refused; `errorCode` and `errorMessage` say why; no payload
  shutdown @10;     # -> server: finish and exit (needs the job token); answered with ack
  join @11;         # worker -> server (sync): a rejoining worker is counted in every step >= `step` of `keys`;
                    # answered like a pull at `step`; badStep when a key is already past `step`
  tableInit @12;    # worker -> server: the job's embedding tables (`tables`, in table-id order) and `tableSeed`; every
                    # worker sends it before its first row request; a server makes its rows of each table at the first
                    # and refuses a later one that differs (layoutMismatch); answered with ack
  rowPull @13;      # worker -> server: the rows of table `table` a worker about to compute step `step` reads (BSP:
                    # after step - 1 was applied); payload frame 0: the row ids (uint64, little-endian, no two equal,
                    # each on this server); answered with rows
  rowPush @14;      # worker -> server: the gradients of step `step` for rows of table `table`: frame 0 the row ids (as
                    # in rowPull, each pulled by this worker for this step), frame 1 their values (ids x dim, row after
                    # row, encoded as `rowEncoding`); BSP: every worker sends one per table and server each step, with
                    # no rows when its batch touched none there; answered with ack
  rows @15;         # server -> worker: the reply to rowPull: one frame, the rows' values in the request's order
                    # (ids x dim, encoded as the request's `rowEncoding`)
}

# Why a request was refused (in an `error` reply).
enum ErrorCode {
  none @0;
  badHeader @1;         # the header frame is not a valid Header (truncated, misaligned size, garbage)
  unknownType @2;       # `type` is not a request this server handles
  badToken @3;          # `jobToken` differs from this job's token
  badSender @4;         # sender role is not worker, or senderRank >= number of workers
  unknownKey @5;        # (tensor, slice) does not exist in the layout
  wrongServer @6;       # the key is owned by another server
  wrongLength @7;       # offset/length/payload size do not match the slice
  wrongPayloadCount @8; # number of payload frames differs from the number of keys (or from 0 for pull)
  badDtype @9;          # payload dtype is not float32
  layoutMismatch @10;   # `layoutFingerprint` differs from the server's layout (different tensor list, slice size or S)
  notInitialized @11;   # push before the slice's init, or a request before any init told the server the layout
  alreadyInitialized @12; # a second init of a slice
  badStep @13;          # BSP push for a step that is already aggregated or not yet open, or a negative step
  duplicatePush @14;    # BSP: this worker already pushed this step for this key
  workerDead @15;       # the sender was declared dead (failure policy continue)
  duplicateKey @16;     # the same key twice in one request
  overloaded @17;       # too many requests waiting for the layout; retry later
  internal @18;         # a bug; the message says what
  stalled @19;          # a read waited most of cluster.request_timeout_ms for pushes that never came; names the workers
  badEncoding @20;      # a payload's encoding is unknown, not allowed for this message, or its contents are invalid
                        # (a sparse index out of range or out of order, a scale that is not a finite number)
  nonFiniteGradient @21; # a pushed gradient (decoded) holds a NaN or an infinity; names the slice, step and element
  unknownTable @22;     # a row request names a table this server was not told of (tableInit), or before any tableInit
  badRow @23;           # a row id outside the table, or a row another server holds
  duplicateRow @24;     # the same row id twice in one request
  tooManyRows @25;      # a request lists more rows than the server's limit (cluster.max_rows_per_request)
  rowNotPulled @26;     # a rowPush names a row this worker did not pull for that step
}

# One key's payload description: the frame with index `frame` (counting
# payload frames from 0, after the header) holds its bytes.
struct KeyRef {
  tensor @0 :UInt32;     # tensor id: index in the model's stable tensor list
  slice @1 :UInt32;      # slice index within the tensor
  offset @2 :UInt64;     # first element of the slice within the tensor (elements)
  length @3 :UInt64;     # number of elements in this payload (elements; for pull: of the slice)
  dtype @4 :DType;       # element type of the slice (float32)
  encoding @5 :Encoding; # how the payload frame encodes the slice's values (none for init and for keys without payload)
}

# How a table's rows start (each value from the run's seed, the table's name, the row and the column).
enum TableInit {
  normal @0;   # N(0, initScale^2)
  uniform @1;  # U(-initScale, initScale)
  zeros @2;
}

# One embedding table: rows x dim float32 values that only the servers hold (carried by `tableInit`).
struct TableInfo {
  name @0 :Text;         # e.g. "user_id"; unique among the job's tables
  rows @1 :UInt64;       # number of rows (ids 0 .. rows - 1)
  dim @2 :UInt32;        # values per row
  init @3 :TableInit;
  initScale @4 :Float32; # the standard deviation (normal) or the bound (uniform)
  hashed @5 :Bool;       # ids are any 64-bit values, rows made on first touch; `rows` is the most rows held
  admitAfter @6 :UInt32; # hashed: a row is stored once pushes held it in this many steps (0, 1: the first)
  expireAfter @7 :Int64; # hashed: a row no push held for this many steps is dropped (0: never)
  bf16 @8 :Bool;         # the servers store the rows as bfloat16 (embedding.storage = bf16); float32 on the wire
}

# One parameter tensor of the model (carried by `init`, in tensor-id order).
struct TensorInfo {
  name @0 :Text;         # e.g. "fc1.weight"; unique within the model
  numel @1 :UInt64;      # number of elements (float32)
}

# The header frame of every message.
struct Header {
  type @0 :MessageType;
  requestId @1 :UInt64;  # chosen by the requester; echoed in the reply
  jobToken @2 :Text;     # per-job secret; a mismatch is refused
  senderRole @3 :Role;
  senderRank @4 :UInt32; # rank within the sender's role
  keys @5 :List(KeyRef); # one entry per payload frame, in frame order
  step @6 :Int64;        # training step / clock the message refers to (push: the step the gradient belongs to,
                         # 0-based; pull: the step the reader is about to compute)
  layoutFingerprint @7 :UInt64; # SliceLayout::fingerprint() of the sender; 0 only in ping/shutdown and replies
  tensors @8 :List(TensorInfo); # init only: the model's whole tensor list (every server derives the same layout)
  sliceBytes @9 :UInt64; # init only: cluster.slice_bytes of the sender (bytes)
  errorCode @10 :ErrorCode;     # error replies only
  errorMessage @11 :Text;       # error replies only: what was wrong, naming the key or field
  numServers @12 :UInt32;       # init only: number of servers the sender's layout assumes
  runTotalSteps @13 :Int64;     # init only: steps the whole run will take (0 = unknown); servers use it for
                                # schedules that depend on the run's length (cosine with lr_schedule.total_steps = 0)
  checkpoint @14 :Bool;         # push/pushPull (BSP): checkpoint the keys when the step this push belongs to
                                # closes, i.e. at step boundary `step` + 1 (worker 0 sets it: checkpoint.every_seconds)
  pullEncoding @15 :Encoding;   # pull/pushPull/join: the encoding of the weights in the reply (none, fp16 or bf16;
                                # cluster.pull_precision); none in every other message
  sharedMemory @16 :Bool;       # the payloads are in shared memory, not in frames (cluster.transport; a worker and a
                                # server on one host that exchanged segments): push/pushPull carry no payload frames,
                                # each key's float32 gradient is in the sender's push segment at the key's slot;
                                # pull/pushPull/join ask for the reply the same way; a weights reply with it carries
                                # no payload frames, each key's weights are in the server's weights segment
  stop @17 :Bool;               # push/pushPull (BSP): the job stops at step boundary `step` + 1: checkpoint the keys
                                # when this step closes, and tell every reader of that step (checkpoint.on_sigterm)
  stopAt @18 :Int64;            # weights replies: > 0 when the servers stopped the job at this step boundary (a
                                # checkpoint was taken there); the reader ends before computing it. 0 otherwise
  contributors @19 :List(UInt32); # push/pushPull (sync): the workers whose gradients each payload sums, in increasing
                                # rank order with the sender first (the workers of one host, summed by the lowest of
                                # them: cluster.host_aggregation); the step counts them all. Empty: the sender alone
  tables @20 :List(TableInfo);  # tableInit only: the job's embedding tables, in table-id order
  table @21 :UInt32;            # rowPull/rowPush/rows: the table's id (its index in `tables`)
  tableSeed @22 :UInt64;        # tableInit only: the run's seed (train.seed), from which the servers make the rows
  rowEncoding @23 :Encoding;    # rowPush: how frame 1 encodes the gradients; rowPull and rows: how the reply encodes
                                # the rows (none: float32, or bf16)
  checkpointAt @24 :Int64;      # weights replies: the latest step boundary a push asked the servers to checkpoint at
                                # (checkpoint.every_seconds: worker 0's flag), 0 while none did; the other workers keep
                                # their error-feedback residuals of that boundary
  late @25 :Bool;               # ack/weights replies to push/pushPull (sync, cluster.backup_workers > 0): the gradient
                                # of at least one key came after its step had closed without it; it was dropped, not
                                # applied, and the request was not refused
  weightsStep @26 :Int64;       # weights replies: the lowest version (steps closed) among the keys' weights as sent;
                                # a reader at step s gets s or more (more: the job went on without this worker's last
                                # pushes, cluster.backup_workers, and its next gradient is for that step)
  rowOffset @27 :UInt64;        # rowPull/rowPush with sharedMemory: the byte offset in the sender's row segment (a worker
                                # and a server on one host that exchanged it) of the rows' float32 values, in the
                                # order of the id frame: a rowPush's gradients are there, a rowPull's rows are written
                                # there by the server before its reply (a rows reply with sharedMemory, no payload)
  skipped @28 :Bool;            # push/pushPull (sync, train.loss_scaling): the sender's gradients of this step are not
                                # finite, so the step is skipped: no key applies it, and the payloads are not read.
                                # Weights replies: the step before the read was skipped (some push of it said so); the
                                # weights are those of the read's step - 1, and the reader pushes that step again
}
