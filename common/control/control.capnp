# The control-plane protocol between the coordinator and every node.
#
# Transport: each node (server or worker) owns one ZeroMQ DEALER socket
# connected to the coordinator's ROUTER. Every message is exactly one frame
# holding a `ControlMessage` (the ROUTER adds and strips the routing id).
# A node's routing id is fixed by the node ("<host>/<pid>/<random>") so a
# reconnect after a TCP drop keeps its identity.
#
# Life of a job:
#   node -> register            coordinator -> clusterMap (to every node, once all S+W registered)
#                               coordinator -> registerRefused (bad token, rank taken, job full, ...)
#   node -> heartbeat           coordinator -> heartbeat (echo; proves the coordinator is alive)
#   node -> barrierEnter(name)  coordinator -> barrierRelease(name) once every live node entered
#                               coordinator -> nodeDead (failure_policy = continue, a worker died)
#                               coordinator -> abort (a node died under policy abort, a server died,
#                                              layout mismatch, rendezvous timeout, coordinator stopped)
#   node -> report(json)        (metrics events; the coordinator writes DIR/metrics.jsonl)
#   server -> stuck(workers)    coordinator -> nodeDead or abort (as for a dead worker), and abort to the stuck ones
#   node -> leave(status)       coordinator -> shutdown (all workers left: servers finish and leave)
#                               coordinator -> nodeDead(left) to the servers (a worker left while others train on)
#   worker -> epochEnter        coordinator -> epochPlan (elastic jobs: who trains the next epoch, from which step)
#   worker -> epochJoined       (a worker that joined the running job is counted by the servers from the plan's step)
#
# Versioning: add fields at the end of a struct with the next ordinal and
# new union members with the next ordinal; never renumber.
@0xc1d6a0e4b2f35a71;

$import "/capnp/c++.capnp".namespace("pshard::control");

# The data plane's schema, named from the source root (common/CMakeLists.txt adds it to the import path).
using Wire = import "/common/protocol/pshard.capnp";

# One process of the job as the coordinator knows it.
struct Node {
  role @0 :Wire.Role;       # server or worker
  rank @1 :UInt32;          # 0-based rank within its role
  endpoint @2 :Text;        # servers: ZeroMQ endpoint peers connect to ("tcp://10.0.0.2:40001"); workers: may be empty
  host @3 :Text;            # host name the process runs on
  pid @4 :Int64;            # process id on that host
  locality @5 :Text;        # where the process can share memory: the machine's boot id and the process's network
                            # namespace ("<boot id>/net:[4026531992]"); equal values: the same host and namespace
}

# node -> coordinator: the first message of every node.
struct Register {
  role @0 :Wire.Role;           # server or worker (coordinator is refused)
  requestedRank @1 :Int64;      # wanted rank within the role; -1 = any free rank
  endpoint @2 :Text;            # see Node.endpoint
  host @3 :Text;                # see Node.host
  pid @4 :Int64;                # see Node.pid
  jobToken @5 :Text;            # per-job secret (env PSHARD_JOB_TOKEN); must equal the coordinator's
  layoutFingerprint @6 :UInt64; # hash of the slice assignment; 0 = not known by this node; all non-zero values must agree
  replacesLive @7 :Bool;        # workers: this process was restarted in place of its rank's process (pshard worker
                                # --join), so it may take over the rank while the old registration still looks live;
                                # false: a live worker of the requested rank refuses this registration
  locality @8 :Text;            # see Node.locality
}

# coordinator -> node: registration refused; the node must exit.
struct RegisterRefused {
  reason @0 :Text;              # human-readable, e.g. "job token mismatch: this coordinator runs another job"
}

# coordinator -> node: the full membership, sent to every node when the last one registered.
struct ClusterMap {
  numServers @0 :UInt32;
  numWorkers @1 :UInt32;
  servers @2 :List(Node);       # index = server rank
  workers @3 :List(Node);       # index = worker rank
  yourRole @4 :Wire.Role;       # the receiving node's role
  yourRank @5 :UInt32;          # the receiving node's rank within its role
  heartbeatIntervalMs @6 :UInt32;   # the coordinator's heartbeat period (milliseconds)
  heartbeatTimeoutMs @7 :UInt32;    # silence after which the coordinator declares a node dead (milliseconds)
  minWorkers @8 :UInt32;        # elastic jobs (cluster.min_workers): the fewest workers an epoch trains with;
                                # numWorkers is then the most, and a rank no process holds is listed with pid 0.
                                # 0: every rank is held (a fixed number of workers)
  joinsRunning @9 :Bool;        # the receiving worker registered while the job ran: it joins at an epoch's start
}

# node -> coordinator: this node has reached barrier `name`.
struct BarrierEnter {
  name @0 :Text;                # barrier name; a name can be reused once its previous round was released
  vote @1 :Bool;                # this node raises a flag in this round (e.g. its gradients are not finite)
}

# coordinator -> node: every live node entered barrier `name`.
struct BarrierRelease {
  name @0 :Text;
  anyVote @1 :Bool;             # some node that entered this round raised its flag (BarrierEnter.vote)
}

# Both directions: liveness. Nodes send one every heartbeat interval (and one
# as soon as the cluster map arrives); the coordinator answers each with one
# carrying the same sequence number and its clock, from which the node
# estimates the offset of its clock to the coordinator's (trace timestamps).
struct Heartbeat {
  seq @0 :UInt64;               # sender's counter, echoed back
  coordinatorClockNs @1 :Int64; # echo only: the coordinator's steady clock when it answered (ns); 0 = unknown
}

# coordinator -> node: `node` is dead (no heartbeat within the timeout, or it
# left with a non-zero status) and the job continues without it.
struct NodeDead {
  node @0 :Node;
  reason @1 :Text;              # e.g. "no heartbeat for 5000 ms"
  left @2 :Bool;                # to servers: a worker that left after its last push (nobody's failure): no step
                                # waits for its push any more
}

# coordinator -> node: the job is over with an error; stop and exit non-zero.
struct Abort {
  reason @0 :Text;              # e.g. "worker 2 (host a, pid 7) is dead: no heartbeat for 5000 ms"
  hasDeadNode @1 :Bool;         # true when a dead node caused the abort
  deadNode @2 :Node;            # which one (valid when hasDeadNode)
}

# coordinator -> node: the job finished normally (every worker left); finish and leave.
struct Shutdown {
  reason @0 :Text;
}

# node -> coordinator: this node is done and stops sending heartbeats.
struct Leave {
  exitStatus @0 :Int32;         # 0 = success; anything else is a failure of this node
  reason @1 :Text;              # a failure's error message (at most 1024 bytes), so that the coordinator's
                                # abort names the real error; empty when none is known
  stepsPushed @2 :Int64 = -1;   # a worker: the steps it pushed (its highest step + 1); -1: not said. The job's
                                # workers push the same steps: one that leaves with fewer than another is the failure
}

# node -> coordinator: one metrics event (docs/METRICS.md) for the job's
# metrics.jsonl. Workers send "start" (what is trained, rank 0), "step"
# (every worker) and "worker_epoch" (every worker, every epoch), servers
# "server_phases" as they stop; the coordinator
# combines the worker_epoch reports of an epoch into its "epoch" event and
# writes the "summary" event when the job ends.
struct Report {
  json @0 :Text;                # one JSON object with an "event" field
}

# server -> coordinator: workers that are alive (their heartbeats come) but hold the job up: a read at this server
# waited most of cluster.request_timeout_ms for their pushes (sync, ssp), or they pushed nothing to it for that long
# (async). The coordinator applies the failure policy to each as to a dead worker, and tells it to exit.
struct Stuck {
  workers @0 :List(UInt32);     # worker ranks
  reason @1 :Text;              # the server's account, e.g. "fc1.weight[slice 0]: the read for step 12 waited 6.4 s
                                # for the push of worker 1, which did not come"
}

# launcher -> coordinator: a process the launcher started has ended. pshard launch sees its children end at once,
# where the coordinator would wait cluster.heartbeat_timeout_ms for a silent node. Sent by a peer that is not a node:
# it carries the job token and names the process by role, rank and pid, so that a restarted process of that rank is
# not affected; the coordinator applies the failure policy as to a node whose heartbeats stopped.
struct ProcessEnded {
  jobToken @0 :Text;
  role @1 :Wire.Role;
  rank @2 :UInt32;
  pid @3 :Int64;
  how @4 :Text;                 # e.g. "was killed by signal 9 (SIGKILL)"
  # pshard join watches the worker it started, whose rank the coordinator gave it: the notice then names it by pid on
  # the watcher's host (its locality, common/util/host.h) instead of by rank.
  anyRank @5 :Bool;
  locality @6 :Text;            # the watcher's host_locality(); a non-empty one must be the node's
}

# worker -> coordinator (elastic jobs): this worker is at the start of `epoch`, whose first step is `step` (the step
# after the last one it trained). A worker that joined the running job sends epoch 0 and step -1: the plan says both.
struct EpochEnter {
  epoch @0 :Int64;
  step @1 :Int64;
}

# coordinator -> worker (elastic jobs): who trains `epoch`, once every live worker has entered it and at least
# minWorkers do. Each member trains shard i of n of the data (i: its place in `members`, n: their number), so the
# epoch has (training samples / (n x batch)) steps. A worker that joins with this epoch gets the plan first, with
# `join` set: it tells the servers to count it from firstStep and answers epochJoined; the other members get the
# plan after every joining worker has answered (or died), so that no server closes firstStep without it.
struct EpochPlan {
  epoch @0 :Int64;
  firstStep @1 :Int64;
  members @2 :List(UInt32);     # worker ranks, increasing
  join @3 :Bool;
}

# worker -> coordinator: a joining worker's servers count it from the plan's first step.
struct EpochJoined {
  epoch @0 :Int64;
}

# worker -> coordinator: a fact of the job the coordinator acts on (not a metrics line, though it may write one).
struct JobFact {
  kind @0 :Kind;
  enum Kind {
    trained @0;     # this worker pushed the job's last step: a death from here on costs the job nothing
    rejoined @1;    # a restarted worker rejoined the running job at `step`: its epochs before that are not awaited
    modelSaved @2;  # this worker saved the job's model to `path` (the summary names it)
  }
  step @1 :Int64;
  path @2 :Text;
}

# worker -> coordinator (async jobs with train.batch_assignment = dynamic): the next `count` batches of `epoch` for
# this worker. The epoch's batches are the batch-sized pieces of its shuffled samples, `batches` of them (the same
# number from every worker of the job).
struct BatchClaim {
  epoch @0 :Int64;
  batches @1 :Int64;
  count @2 :UInt32;
}

# coordinator -> worker: batches [first, first + count) of `epoch` are this worker's to train, no other's; count 0:
# every batch of the epoch is taken.
struct BatchesGranted {
  epoch @0 :Int64;
  first @1 :Int64;
  count @2 :UInt32;
}

# The one message type on the control socket.
struct ControlMessage {
  union {
    register @0 :Register;
    registerRefused @1 :RegisterRefused;
    clusterMap @2 :ClusterMap;
    barrierEnter @3 :BarrierEnter;
    barrierRelease @4 :BarrierRelease;
    heartbeat @5 :Heartbeat;
    nodeDead @6 :NodeDead;
    abort @7 :Abort;
    shutdown @8 :Shutdown;
    leave @9 :Leave;
    report @10 :Report;
    stuck @11 :Stuck;
    processEnded @12 :ProcessEnded;
    epochEnter @13 :EpochEnter;
    epochPlan @14 :EpochPlan;
    epochJoined @15 :EpochJoined;
    jobFact @16 :JobFact;
    workerRegistered @17 :Node;   # to servers: a worker that registered while the job ran (a restart, a joiner);
                                  # a server's shared-memory channel admits this process (pid) for its rank from now on
    batchClaim @18 :BatchClaim;
    batchesGranted @19 :BatchesGranted;
  }
}
