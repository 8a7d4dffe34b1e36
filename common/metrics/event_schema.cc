// The events of metrics.jsonl and their fields: the one declaration that the writers, the reader and
// docs/METRICS.md's field tables follow (event_schema.h). A field's spec is NAME:TYPE, TYPE one of i (integer),
// n (number, or "nan"/"inf"/"-inf"), s (string), b (bool), l (list), o (object), followed by * when it may be null
// and ? when it may be absent. A meaning is Markdown, as METRICS.md shows it.
#include "common/metrics/event_schema.h"

namespace pshard::metrics_events::detail {

const std::vector<RawEvent>& raw_events() {
  static const std::vector<RawEvent> kEvents = {
      {"start",
       "distributed runs: the first line, sent by worker 0",
       {
           {"model:s optimizer:s lr:n mode:s", "what is trained"},
           {"batch_size:i global_batch:i", "samples per step per worker / of all workers"},
           {"model_bytes:i", "bytes of all parameters (float32)"},
           {"epochs:i steps_per_epoch:i",
            "the run's length (`pshard launch` computes its progress line and ETA from them); `epochs` is "
            "0 for a program (`pshard.torch`, the C API) whose config does not set `train.epochs`: its "
            "loop decides, and the run has no declared length"},
           {"program:b?",
            "only for a program's workers (`pshard.torch`, the C API): `true`; such a run saves its own "
            "model, so its end does not warn that no `model.bin` was written"},
           {"start_step:i?",
            "only in a resumed run (`pshard launch --resume`, or a restart after a server failure): the "
            "global step training continued from; also copied into the summary"},
       }},
      {"step",
       "every `train.log_every` steps, default 50, from every worker / the local trainer",
       {
           {"rank:i", "the worker that logged the line (0 for `pshard train`)"},
           {"epoch:i", "1-based epoch"},
           {"step:i", "0-based global step (counted over the whole run)"},
           {"loss:n*", "mean training loss of this worker's batch of this step"},
           {"lr:n", "learning rate used for this step"},
           {"wall_s:n", "seconds since the start of training (this worker's clock)"},
           {"step_s:n",
            "wall time of this step on this worker, from asking for its batch to the end of its "
            "`end_step`"},
           {"data_s:n forward_s:n backward_s:n comm_wait_s:n other_s:n",
            "where `step_s` went (the phases below); they add up to `step_s`"},
           {"loss_scale:n? skipped:b?",
            "only with loss scaling (`train.loss_scaling`): the scale of this step, and whether the "
            "workers skipped it (some worker's gradients were not finite). A skipped step is logged by "
            "every worker whatever `train.log_every` says; `step` counts batches, so the servers' step "
            "(and `lr`'s) lags it by the steps skipped before"},
       }},
      {"epoch",
       "one per epoch; in a distributed run combined over all workers",
       {
           {"epoch:i",
            "the epoch's number: 1-based for pshard's own workers; for a program, as it numbered the "
            "epoch in `ps.report(epoch=...)` / `pshard_epoch_report.label` (from 0, 1 or anything, "
            "increasing)"},
           {"epoch_index:i?",
            "only where `epoch` is not the epoch's 1-based place in the run (a program numbering from 0, "
            "say): that place. The terminal line reads `epoch 0 (1 of 8)`; without a declared length, "
            "`epoch 0`"},
           {"step:i", "global steps done after this epoch"},
           {"train_loss:n* train_acc:n*", "mean loss and accuracy (fraction 0..1) over the samples trained this epoch"},
           {"test_loss:n* test_acc:n*", "on the whole test set after the epoch (`null` if `train.eval = false`)"},
           {"samples_per_s:n*", "training samples processed per second this epoch, all workers together"},
           {"epoch_s:n", "wall time of the epoch (training only, not evaluation)"},
           {"eval_s:n", "wall time of the evaluation"},
           {"data_s:n forward_s:n backward_s:n comm_wait_s:n other_s:n",
            "the measured phases of the epoch's training (mean over workers); each worker's add up to its "
            "`epoch_s`; `comm_wait_s` is 0 for `pshard train`"},
           {"bytes_sent:i bytes_recv:i",
            "payload bytes sent/received by all workers this epoch through sockets, as they go on the "
            "wire (after compression), counted by each worker's KV client: sent bytes when a push is made "
            "(the frames it built), received bytes as each reply arrives, so a reply still in flight when "
            "an epoch ends counts in the next; per step: divide by the epoch's steps"},
           {"fp32_bytes_sent:i fp32_bytes_recv:i",
            "the same payloads as float32: what `cluster.compression = none` and `cluster.pull_precision "
            "= fp32` would have moved (`bytes_*` / `fp32_bytes_*` is what compression left; 0 for `pshard "
            "train`)"},
           {"shm_bytes_sent:i shm_bytes_recv:i",
            "payload bytes that went through shared memory instead (a worker and a server on one host, "
            "`cluster.transport`; docs/PROTOCOL.md): not in `bytes_*`, which count only what went through "
            "sockets; `fp32_bytes_*` counts both"},
           {"steps:i", "steps taken this epoch (the most any worker took)"},
           {"samples:i", "training samples of this epoch, all workers together"},
           {"hosts:l",
            "per-host list: `{host, workers, bytes_sent, bytes_recv, shm_bytes_sent, shm_bytes_recv}`, "
            "the sums of the workers of one host; `host` names it by its lowest worker rank (workers on "
            "one host: equal localities, one machine and one network namespace). Shared memory counts "
            "what each process wrote into it (sent) and read from it (recv)"},
           {"network_bytes_per_host_step:n* shm_bytes_per_host_step:n*",
            "the busiest host's bytes per step this epoch through sockets (sent + received) and through "
            "shared memory; with one push per host (`cluster.host_aggregation`, PROTOCOL.md) the first "
            "stays about twice the model's bytes (`model_bytes` in the summary) whatever the number of "
            "the host's workers"},
           {"wall_s:n", "seconds since the start of training"},
           {"lr:n", "the learning rate of the epoch's last step (its lowest-ranked worker's)"},
           {"gpu_util_pct:n? gpu_mem_peak_bytes:i?",
            "only when a worker sampled its GPU (section \"GPU utilisation and memory\"): the mean NVML "
            "utilisation (percent) over the workers that did, and the highest memory use of one of their "
            "GPUs this epoch"},
           {"loss_scale:n? skipped_steps:i?",
            "only with loss scaling: the scale at the end of the epoch, and the steps of the epoch every "
            "worker skipped (async and SSP jobs, whose workers skip their own: the most one skipped) (`pshard "
            "report` puts both in `runs.csv` and `convergence_epochs.csv`)"},
           {"late_steps:i? stragglers:l?",
            "only with backup workers (`cluster.backup_workers`): the steps, summed over the workers, whose "
            "gradients the servers dropped because the step had closed without them, and the workers "
            "late in more than 10 % of the epoch's steps, `{rank, late_steps}` (the terminal's epoch line "
            "names them)"},
           {"figures:o?",
            "only when a program named figures of its own (`ps.report(figures={\"test_auc\": ...})`, C "
            "`pshard_report_figure`): `{name: value}`, each the mean over the workers that reported it, "
            "weighted by their test samples (by their samples when they did not evaluate). The terminal's "
            "epoch line shows them after the test accuracy (`test_auc 0.6724`), and `pshard report` gives "
            "each a column of its name in `runs.csv`, `convergence_epochs.csv` and report.md's runs table"},
           {"workers:l?",
            "per-worker list: `{rank, samples, epoch_s, data_s, forward_s, backward_s, comm_wait_s, "
            "other_s, bytes_sent, bytes_recv, shm_bytes_sent, shm_bytes_recv}`, plus `gpu_util_pct` and "
            "`gpu_mem_peak_bytes` for a worker that sampled its GPU, `late_steps` and `caught_up_steps` "
            "(the batches it skipped to catch up with the servers) with backup workers (distributed runs "
            "only)"},
           {"missing_workers:l?",
            "only when the job ended before every worker reported this epoch (a worker that left or died "
            "without reporting it, a program that never calls `ps.report()`), or when a member of an "
            "elastic epoch died during it (its shard of the epoch was not trained; the summary's "
            "`warnings` says so too): the ranks whose figures the line lacks. An epoch line waits for "
            "every worker still in the job; at the job's end the epochs still waiting are written with "
            "the reports they have, and the coordinator warns about each rank that never reported an "
            "epoch"},
       }},
      {"rejoin",
       "a restarted worker rejoined the running job; OPERATIONS.md \"Worker join\"",
       {
           {"rank:i", "the worker's rank"},
           {"step:i", "the step it counts from; epochs that ended before it are combined without this worker"},
       }},
      {"members",
       "an elastic job's epoch plan; OPERATIONS.md \"Elastic jobs\"",
       {
           {"epoch:i", "the epoch"},
           {"first_step:i", "its first global step"},
           {"steps:i?", "its number of steps: floor(training samples / (members x `train.batch_size`))"},
           {"workers:l", "the members' ranks; member i trains shard i of the epoch's data"},
           {"batch:i",
            "each member's batch: `train.batch_size`, or with `cluster.elastic_batch = global` (min "
            "workers x `train.batch_size`) / members, rounded down"},
           {"global_batch:i", "members x `batch`"},
           {"lr:n",
            "the learning rate of its first step for that global batch (`lr_schedule.scaling = linear` "
            "scales it)"},
       }},
      {"failure",
       "the coordinator judged a worker or server dead or stuck",
       {
           {"role:s rank:i host:s pid:i", "the node"},
           {"verdict:s",
            "`dead` (it stopped heartbeating, left with a failure status, or its process ended) or "
            "`stuck` (alive, but a server waited for its pushes past `cluster.request_timeout_ms`)"},
           {"why:s",
            "the reason, as the coordinator logs it (`it left with exit status 1: ...`, `no heartbeat for "
            "3.0 s`)"},
           {"wall_s:n*", "seconds since the job started running; `null` before that"},
       }},
      {"stall",
       "a server's sync step waits; see OPERATIONS.md \"Stalls and stuck workers\"",
       {
           {"server:i", "the server's rank"},
           {"step:i", "the step (SSP: clock) whose weights the waiting read needs"},
           {"waited_s:n", "how long the oldest read of that step has waited"},
           {"missing:l",
            "ranks of the live workers whose pushes it waits for (sync: not pushed the open step; ssp: "
            "clocks more than `cluster.staleness` behind)"},
           {"slice:s", "the slice it waits at, e.g. `fc2.weight[slice 0]`"},
           {"initial_weights:b", "true: it waits for worker 0's initial weights (then `missing` is `[0]`)"},
           {"last_heard_s:l",
            "per missing worker, seconds since the coordinator's last heartbeat from it (`null`: not a "
            "live worker); small means alive but not pushing, large means frozen or cut off"},
       }},
      {"summary",
       "the last line",
       {
           {"test_acc:n* test_loss:n*", "after the last epoch"},
           {"train_loss:n* train_acc:n*", "of the last epoch"},
           {"samples_per_s:n*", "training samples / training seconds over the whole run"},
           {"wall_s:n", "total wall time including evaluation"},
           {"epochs:i steps:i", "how many were run"},
           {"train_s:n", "training seconds: the sum of the epochs' `epoch_s`"},
           {"model:s? optimizer:s? lr:n? batch_size:i? global_batch:i?", "what was trained (`batch_size` per worker)"},
           {"model_bytes:i?", "bytes of all parameters (float32)"},
           {"program:b? start_step:i?", "as in the start line, when it has them"},
           {"data_s:n forward_s:n backward_s:n comm_wait_s:n other_s:n",
            "totals over the run (mean over workers); for one worker they add up to `train_s` (the sum of "
            "the epochs' `epoch_s`, which is the slowest worker's)"},
           {"server_phases:l?",
            "distributed runs: one entry per server, sent as it stops: `{rank, threads, wall_s, recv_s, "
            "aggregate_s, update_s, reply_s, idle_s, other_s}`; its phases are summed over its `threads` "
            "threads and add up to `threads` x `wall_s`. A job with embedding tables adds `tables`: per "
            "table `{table, bytes, rows_held}`, and for a hashed table `admitted`, `expired` and "
            "`not_admitted` (docs/SPARSE.md)"},
           {"bytes_sent:i bytes_recv:i", "totals over the run, all workers (after compression)"},
           {"fp32_bytes_sent:i fp32_bytes_recv:i", "the same payloads as float32, totals over the run"},
           {"shm_bytes_sent:i shm_bytes_recv:i", "payload bytes through shared memory, totals over the run"},
           {"num_hosts:i network_bytes_per_host_step:n* shm_bytes_per_host_step:n*",
            "the hosts the workers ran on, and the busiest host's bytes per step over the run (as in the "
            "epoch lines)"},
           {"gpu_util_pct:n? gpu_mem_peak_bytes:i?",
            "only when a worker sampled its GPU: the epochs' `gpu_util_pct` weighted by their `epoch_s`, "
            "and the highest `gpu_mem_peak_bytes`"},
           {"loss_scale:n? skipped_steps:i?",
            "only with loss scaling: the last epoch's scale, and the steps skipped over the run"},
           {"late_steps:i?", "only with backup workers: the epochs' `late_steps`, summed"},
           {"figures:o?", "only when the program named figures of its own: the last epoch's"},
           {"workers:i servers:i mode:s?",
            "1, 0, `\"local\"` for `pshard train`; W, S, `sync`/`async`/`ssp` otherwise (an elastic job: "
            "the workers of its last epoch)"},
           {"min_workers:i? max_workers:i?", "an elastic job's range (`--workers MIN:MAX`); absent otherwise"},
           {"workers_finished:l?", "ranks of the workers that completed the run (distributed runs)"},
           {"coordinator_cpu_s:n?",
            "distributed runs: the coordinator's CPU time, user + system, over the job (heartbeats, barrier "
            "votes, epoch plans, these records): the control plane's cost, `tests/bench/control_plane_bench.py` "
            "per step"},
           {"model_file:s*",
            "path of the saved model (`RUN_DIR/model.bin`); null when no worker saved one "
            "(docs/OPERATIONS.md)"},
           {"warnings:l?",
            "only when there is one: what the run should know about itself as a whole, e.g. `every worker "
            "stopped after 12 pushed steps, short of the run's declared length (train.epochs x "
            "steps_per_epoch = 32 steps)`: a program's loop ended before the length its config declared "
            "(the run still finished)"},
           {"stopped:s?",
            "only when every worker stopped at a checkpoint on SIGTERM (`checkpoint.on_sigterm`, "
            "OPERATIONS.md): why; such a run expects no model file"},
           {"aborted:s?",
            "only when the job was aborted: why (e.g. `worker 1 (host a, pid 7) is dead: ...`); the other "
            "fields are those of the epochs it finished. The summary line then reads `aborted (REASON): "
            "after the epochs it finished, test accuracy ...`, and `pshard report` lists the run as "
            "aborted (`finished` = `aborted` in runs.csv, `(aborted)` in the table), not as finished"},
       }},

  };
  return kEvents;
}

}  // namespace pshard::metrics_events::detail
