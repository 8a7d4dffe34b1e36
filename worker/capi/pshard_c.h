/* The C API of a pshard worker (libpshard_c.so): the one boundary to other languages (python/pshard).
 *
 * A worker process started by `pshard launch ... -- CMD` or `pshard task`/`pshard slurm ... -- CMD` finds its job
 * in PSHARD_* environment variables (docs/PYTHON.md). Through this API it registers with the job's coordinator,
 * declares its parameter tensors, and pushes gradients / pulls weights of the sharded servers, which run the
 * optimizer from the job's config. It behaves like the C++ worker (`pshard worker`): the same heartbeats,
 * failure policies, metrics events and progress line.
 *
 *   pshard_client* c;
 *   if (pshard_connect(&c) != PSHARD_OK) { fprintf(stderr, "%s\n", pshard_last_error()); return 1; }
 *   int64_t shape[2] = {256, 784};
 *   int w = pshard_add_tensor(c, "fc1.weight", 2, shape, PSHARD_FLOAT32);      // every tensor, same order on all ranks
 *   pshard_start(c, "mlp", 64, steps_per_epoch);                              // connects to the servers
 *   pshard_request r;
 *   if (pshard_rank(c) == 0) { pshard_init_tensor(c, w, weights, &r); pshard_wait(c, r, -1); }
 *   pshard_pull(c, w, weights, 0, &r); pshard_wait(c, r, -1);                 // everyone starts from rank 0's weights
 *   for (int64_t t = 0; t < steps; ++t) {
 *     compute_gradient(weights, grad);
 *     pshard_push_pull(c, w, grad, weights, t, &r);                           // gradient of step t in, weights out
 *     if (pshard_wait(c, r, -1) != PSHARD_OK) break;
 *   }
 *   pshard_close(c, 0, NULL);
 *
 * Errors: every call returns a pshard_status (or a non-negative value where it says so); on an error status,
 * pshard_last_error() describes it. No C++ exception crosses this API.
 *
 * Threads: after pshard_start, one pshard_client may be used from several threads at once (the KV client's sockets are
 * used by one thread at a time: a calling thread or the client's I/O thread; job events and heartbeats run on the
 * library's own threads). pshard_add_tensor, pshard_start and pshard_close must not race with any other call on the
 * same client. pshard_last_error() is per thread.
 *
 * Buffers: the API never copies a tensor. A buffer passed to pshard_init_tensor, pshard_pull or pshard_push_pull
 * must stay alive and unchanged (gradient) / untouched (weights) until pshard_wait or pshard_poll reported that
 * request done (OK or an error other than ABORTED); after ABORTED, until pshard_close returned. Tensors are float32
 * and contiguous.
 */
#ifndef PSHARD_C_H_
#define PSHARD_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 2: pshard_epoch_report gained `figures` (which figures were measured). 4: elastic jobs (pshard_elastic,
 * pshard_epoch_plan, pshard_joining_epoch). 5: pshard_barrier_vote. 6: pshard_epoch_report gained loss_scale and
 * skipped_steps (figure PSHARD_LOSS_SCALING). 7: pshard_epoch_report gained label (the program's own epoch
 * numbering) and the figure PSHARD_LOSS_MEANS; train.epochs is optional outside elastic jobs, and the end of a job
 * is judged by the steps the workers pushed (pshard_close). 8: embedding tables held by the servers
 * (pshard_add_table, pshard_add_hashed_table, pshard_pull_rows, pshard_push_rows). 9: pshard_report_figure (a
 * program's own figures of an epoch, such as a test AUC). 10: PSHARD_JOB_ENDED (pshard_start of a worker that joined
 * an elastic job too late to train). 11: pshard_scale_loss, pshard_request_skip and pshard_wait_skipped (a sync
 * job's steps skipped for loss scaling by the servers). */
#define PSHARD_C_API_VERSION 11

typedef enum pshard_status {
  PSHARD_OK = 0,
  PSHARD_PENDING = 1,          /* pshard_poll: not done yet (the request stays valid) */
  PSHARD_JOB_ENDED = 2,        /* pshard_start: this worker joined an elastic job that ended before another epoch
                                  began, so it has nothing to train: leave with pshard_close and exit 0 (as the C++
                                  worker does) */
  PSHARD_ERR_ARGUMENT = -1,    /* a NULL pointer, an unknown tensor index or request, a bad shape or dtype */
  PSHARD_ERR_ENVIRONMENT = -2, /* PSHARD_* variables missing or malformed: not started by pshard launch/task */
  PSHARD_ERR_CONFIG = -3,      /* the job's config file cannot be read or is invalid */
  PSHARD_ERR_CONNECT = -4,     /* the coordinator refused or did not answer the registration */
  PSHARD_ERR_STATE = -5,       /* a call out of order (e.g. pull before pshard_start, init on a rank != 0) */
  PSHARD_ERR_SERVER = -6,      /* a server refused or did not answer a request (e.g. a tensor list that differs
                                  from rank 0's: the text names the first tensor that differs) */
  PSHARD_ERR_TIMEOUT = -7,     /* pshard_wait/pshard_barrier: the deadline passed (a wait's request stays valid) */
  PSHARD_ERR_ABORTED = -8,     /* the job was aborted (a dead node under failure_policy = abort, the coordinator
                                  lost): pshard_last_error() says why; leave with pshard_close */
  PSHARD_ERR_INTERNAL = -9     /* anything else (out of memory, ...) */
} pshard_status;

typedef enum pshard_dtype { PSHARD_FLOAT32 = 0 } pshard_dtype;

typedef struct pshard_client pshard_client; /* opaque; one per worker process */
typedef uint64_t pshard_request;            /* an outstanding request; waited for (or polled done) exactly once */

/* The text of the last error status returned on this thread ("" if none). Valid until the next call. */
const char* pshard_last_error(void);
/* A status's name: "PSHARD_ERR_TIMEOUT". Static storage. */
const char* pshard_status_name(int status);

/* ---- The job ---------------------------------------------------------------------------------------------- */

/* Reads the job from the environment (PSHARD_COORDINATOR, PSHARD_CONFIG, PSHARD_SET, PSHARD_RANK,
 * PSHARD_NUM_WORKERS, PSHARD_LOCAL_RANK, PSHARD_JOB_TOKEN, PSHARD_RUN_DIR, PSHARD_KEY_DIR), registers with the
 * coordinator as a worker and waits for every node of the job (cluster.rendezvous_timeout_ms). On success *out
 * owns the client: release it with pshard_close. ENVIRONMENT, CONFIG or CONNECT otherwise (*out = NULL). */
int pshard_connect(pshard_client** out);

/* Leaves the job (exit_status 0: finished; else `reason`, may be NULL, is what the coordinator's abort quotes),
 * stops the heartbeats and frees the client; requests not waited for are dropped. NULL is a no-op.
 * The program decides how long it trains: the job has finished when every worker left with 0 after pushing the
 * same steps. A worker that leaves (with 0 or not) having pushed fewer steps than a worker that goes on is the
 * job's failure (cluster.failure_policy decides: abort ends the job naming it, continue finishes without it and
 * the launch fails naming it); the workers that went on are not. Where every worker stopped short of the declared
 * length (train.epochs x steps_per_epoch), the summary warns. In an elastic job, whose members train different
 * steps, leaving with 0 before reporting epoch train.epochs is leaving as failed. */
int pshard_close(pshard_client* c, int exit_status, const char* reason);

/* This worker's rank (0..size-1), the number of workers (an elastic job's: the most), and the rank among the workers
 * on this host. */
int pshard_rank(const pshard_client* c);
int pshard_size(const pshard_client* c);
int pshard_local_rank(const pshard_client* c);
/* ---- Elastic jobs (`pshard launch --workers MIN:MAX`; docs/OPERATIONS.md "Elastic jobs") --------------------- */
/* 1 when the job's workers may change between epochs, else 0. */
int pshard_elastic(const pshard_client* c);
/* After pshard_start: waits at the start of `epoch` (1-based), whose first step is `step` (the next step this worker
 * pushes), for the coordinator's plan of it: *first_step, this worker's place among the epoch's members (*index) and
 * their number (*count); their ranks into members[0..max_members) when members is not NULL. Member i of n trains
 * shard i of n of the epoch's data. A worker that joined the running job (pshard_joining_epoch) gets the plan of
 * that epoch at once. The learning rate the servers apply follows the members' global batch (n x batch_size).
 * ABORTED when the job ended meanwhile, TIMEOUT when no plan came within cluster.request_timeout_ms +
 * cluster.rendezvous_timeout_ms, STATE in a job that is not elastic. */
int pshard_epoch_plan(pshard_client* c, int64_t epoch, int64_t step, int64_t* first_step, int* index, int* count,
                      uint32_t* members, int max_members);
/* After pshard_start: the epoch (1-based) this worker joins the running elastic job with, or 0 when it did not join
 * one (it trains from the first epoch). A joining worker's pshard_start waits for that epoch's start; its
 * pshard_start_step is the epoch's first step, and its first pull of each tensor there is a join: once all are done,
 * the epoch's other members start it. */
int pshard_joining_epoch(const pshard_client* c, int64_t* out);

/* The job config's value of `key` ("train.epochs") as TOML text ("3", "0.05", "sgd"), written with its
 * terminating NUL into buf[0..len); returns the text's length (without NUL), which may be >= len (then the text
 * was cut: call again with a bigger buffer). ARGUMENT for an unknown key. */
int pshard_config_get(const pshard_client* c, const char* key, char* buf, size_t len);
/* The type of config key `key`, so that a binding reads pshard_config_get's text as what it is (a string "true" is
 * no boolean): PSHARD_CONFIG_STRING, _INT, _DOUBLE, _BOOL or _INT_LIST; ARGUMENT for an unknown key. */
enum {
  PSHARD_CONFIG_STRING = 0,
  PSHARD_CONFIG_INT = 1,
  PSHARD_CONFIG_DOUBLE = 2,
  PSHARD_CONFIG_BOOL = 3,
  PSHARD_CONFIG_INT_LIST = 4
};
int pshard_config_type(const char* key);

/* Blocks until every live node of the job entered barrier `name`; timeout_ms < 0: no limit but the job's end. */
int pshard_barrier(pshard_client* c, const char* name, int64_t timeout_ms);
/* The same barrier, where each worker raises a flag or not (`vote` nonzero): *any_vote is 1 when some worker of the
 * round raised it, else 0, the same on every worker (e.g. "my gradients are not finite": skip the step everywhere). */
int pshard_barrier_vote(pshard_client* c, const char* name, int vote, int* any_vote, int64_t timeout_ms);

/* ---- Tensors ---------------------------------------------------------------------------------------------- */

/* Declares a parameter tensor, before pshard_start; every rank declares the same tensors in the same order.
 * Returns its index (0, 1, ...), or ARGUMENT (empty or duplicate name, ndim < 0, a dimension < 1, a dtype other
 * than float32) or STATE (after pshard_start). The shape is part of the layout every rank must agree on. */
int pshard_add_tensor(pshard_client* c, const char* name, int ndim, const int64_t* shape, int dtype);

/* Connects to the servers with the declared tensors. Rank 0 also writes the run's "start" event (docs/METRICS.md)
 * naming `model` and the per-worker `batch_size`, and its tensor list, PSHARD_RUN_DIR/tensors.txt, from which a rank
 * whose tensors differ learns the first difference. steps_per_epoch (0: unknown) times
 * train.epochs is the run's length, which a cosine schedule needs: CONFIG when it is needed and unknown.
 * ARGUMENT when no tensor was declared; STATE when called twice. A worker that joined an elastic job (pshard join)
 * waits here for the next epoch's start; JOB_ENDED when the job ended first. */
int pshard_start(pshard_client* c, const char* model, int64_t batch_size, int64_t steps_per_epoch);

/* The step this worker starts at, after pshard_start: 0 for a new run; the checkpoint's step when the run was resumed
 * (`pshard launch --resume`, or restarted after a server failed: PSHARD_START_STEP); for a worker restarted by the
 * launcher (cluster.restart_workers: PSHARD_REJOIN=1), a step boundary the running workers have not reached, and its
 * first pull of each tensor at that step rejoins the job (the servers count it again from there). Whenever it is not
 * 0, nobody sends initial weights: every worker pulls the servers' weights of that step. STATE before pshard_start. */
int pshard_start_step(const pshard_client* c, int64_t* out);

/* checkpoint.on_sigterm = checkpoint (sync): the pushes of step `step` issued after this call ask the servers to stop
 * the job when that step closes, at boundary step + 1, which every server then checkpoints. Call it when the
 * process got SIGTERM, before the first push of the next step. */
int pshard_request_stop(pshard_client* c, int64_t step);

/* The step boundary at which the servers stopped the job, from the replies received so far (0: none yet): a worker
 * whose next step is >= it ends there, leaving with pshard_close(c, 75, ...) (75: stopped at a checkpoint). */
int pshard_stop_at(const pshard_client* c, int64_t* out);

/* Before pshard_start: this worker scales its loss (a GradScaler) and may skip steps (pshard_request_skip), so its
 * pushes are its own, never part of its host's sum (cluster.host_aggregation = auto pushes per worker for it; every
 * worker of the job calls this, or none). pshard_start then answers STATE under cluster.host_aggregation = always. */
int pshard_scale_loss(pshard_client* c);

/* Loss scaling in a sync job: the pushes of step `step` issued after this call say that this worker's gradients of
 * that step are not finite, and every server then skips the step for every worker: nothing of it is applied, and
 * pshard_wait_skipped tells each worker so with the step's first weights (the weights it began with). Every worker
 * then pushes the same step again; call it with -1 before doing so (-1: no step is skipped). STATE in an async or
 * SSP job, whose workers skip a step of their own by not pushing it. */
int pshard_request_skip(pshard_client* c, int64_t step);

/* The initialiser only (pshard_initialiser), once per tensor, in a run that starts at step 0: the initial weights
 * (STATE on another rank, or when pshard_start_step is not 0). */
int pshard_init_tensor(pshard_client* c, int tensor, const float* weights, pshard_request* out);

/* *out = 1 when this worker sends the initial weights: rank 0, or, under failure_policy = continue, the lowest live
 * rank once every lower one was declared dead (before the servers had the weights, the others would wait for them
 * forever); 0 otherwise. A worker waiting for the weights of step 0 asks again while it waits. */
int pshard_initialiser(pshard_client* c, int* out);

/* The weights a worker about to compute step `step` (0-based) may read, written into `weights` (BSP: step-1 was
 * applied everywhere; SSP: within the staleness bound; ASP: current). */
int pshard_pull(pshard_client* c, int tensor, float* weights, int64_t step, pshard_request* out);

/* The gradient of step `step` in, the weights for step + 1 out, in one round trip per server. In sync mode every
 * worker pushes every tensor of every step (a tensor without a gradient pushes zeros). */
int pshard_push_pull(pshard_client* c, int tensor, const float* grad, float* weights, int64_t step,
                     pshard_request* out);

/* Whether request `r` is done: PSHARD_PENDING (still valid), PSHARD_OK (done; the buffers are free), or the error
 * that ended it (done too: SERVER, ABORTED, ...). */
int pshard_poll(pshard_client* c, pshard_request r);

/* Blocks until request `r` is done or timeout_ms passed (< 0: until cluster.request_timeout_ms, after which the
 * request fails with SERVER). OK, TIMEOUT (r stays valid), or the error that ended it. Returns ABORTED as soon as
 * the job is aborted. */
int pshard_wait(pshard_client* c, pshard_request r, int64_t timeout_ms);

/* pshard_wait, and *skipped = 1 when `r` is a push_pull of a step that a server skipped (pshard_request_skip on any
 * worker of the sync job), 0 otherwise (or when the wait did not end well). Every push_pull of a step says the same:
 * the first one waited for tells. */
int pshard_wait_skipped(pshard_client* c, pshard_request r, int64_t timeout_ms, int* skipped);

/* ---- Embedding tables (docs/SPARSE.md): rows that only the servers hold ------------------------------------ */

/* How a table's rows start: each value from run.seed, the table's name, the row and the column. */
enum { PSHARD_INIT_NORMAL = 0, PSHARD_INIT_UNIFORM = 1, PSHARD_INIT_ZEROS = 2 };
/* Declares an embedding table of `rows` x `dim` float32 values, before pshard_start; every rank declares the same
 * tables in the same order. No worker holds it whole: row r lives on server r mod S, made there from the seed
 * (`init`: PSHARD_INIT_NORMAL with standard deviation `init_scale`, _UNIFORM on [-init_scale, init_scale], or
 * _ZEROS), and updated there row by row with embedding.optimizer. Returns its index (0, 1, ...), or ARGUMENT (an
 * empty or repeated name, rows or dim < 1, an unknown init, a negative or non-finite scale) or STATE (after
 * pshard_start). A job with tables still declares at least one dense tensor (pshard_add_tensor). */
int pshard_add_table(pshard_client* c, const char* name, uint64_t rows, int dim, int init, double init_scale);
/* A hashed table (docs/SPARSE.md): its ids are any 64-bit values (hashed feature ids), at most `capacity` rows are
 * held (each server its share), and a row is made from its id the first time a step's pushes hold it once
 * `admit_after` steps did (0 or 1: the first), and dropped when no push held it for `expire_after` steps (0: never).
 * A read of an id not stored returns the values its row would start with. Otherwise as pshard_add_table. */
int pshard_add_hashed_table(pshard_client* c, const char* name, uint64_t capacity, int dim, int init, double init_scale,
                            uint32_t admit_after, int64_t expire_after);
/* The n rows ids[0..n) of `table` (no two equal, each < rows) that a worker about to compute step `step` reads (sync:
 * after step - 1 closed), written into out[0 .. n x dim) in the order of `ids`. Keep ids and out alive until the
 * request is done. ARGUMENT for a row outside the table or listed twice. */
int pshard_pull_rows(pshard_client* c, int table, const uint64_t* ids, size_t n, float* out, int64_t step,
                     pshard_request* req);
/* The gradients of step `step` for n rows of `table` (grads: n x dim), each a row this worker pulled for `step`
 * (else the request fails with SERVER: rowNotPulled). Copied: the buffers are free when the call returns. In a sync
 * job every worker pushes each table once per step, with n = 0 when its batch touched none of its rows. */
int pshard_push_rows(pshard_client* c, int table, const uint64_t* ids, size_t n, const float* grads, int64_t step,
                     pshard_request* req);

/* ---- Metrics (docs/METRICS.md) ---------------------------------------------------------------------------- */

/* One training step's loss; rank 0 writes a "step" event every train.log_every steps (other ranks: no-op). */
int pshard_report_step(pshard_client* c, int64_t epoch, int64_t step, double loss);

/* pshard_epoch_report.figures: the figures this worker measured. A figure not named is absent (null in metrics,
 * never a zero); each figure of the "epoch" event combines the ranks that measured it. */
#define PSHARD_TRAIN_LOSS 1u    /* loss_sum */
#define PSHARD_TRAIN_ACC 2u     /* correct */
#define PSHARD_TEST_LOSS 4u     /* test_loss_sum (needs test_samples >= 0) */
#define PSHARD_TEST_ACC 8u      /* test_correct (needs test_samples >= 0) */
#define PSHARD_LOSS_SCALING 16u /* loss_scale and skipped_steps: the worker scales its loss (a GradScaler) */
#define PSHARD_LOSS_MEANS                                                                    \
  32u /* loss_sum and test_loss_sum hold per-sample means, not sums (a mean near the largest \
         double would overflow as a sum); the combined figures are the same */

/* What this worker measured in one epoch; the coordinator combines every rank's report of an epoch into the
 * "epoch" event (sums over ranks, not means of means). Bytes on the wire and the time blocked in pshard_wait
 * since the last report (comm_wait_s) are added by the library; the rest of epoch_s that data_s, forward_s and
 * backward_s do not account for is other_s (docs/METRICS.md). A loss may be NaN or infinite (a diverged run): it
 * is recorded as "nan", "inf" or "-inf". ARGUMENT for an epoch or label that does not increase from this worker's
 * last report, an epoch < 1 (or, in an elastic job, above train.epochs), a negative count of a measured figure, a
 * test figure without test_samples, or a loss scale that is not positive and finite. */
typedef struct pshard_epoch_report {
  int64_t epoch;        /* 1-based place of the epoch in the run (the first after start step s: s / steps_per_epoch
                           + 1): the workers' reports of an epoch are combined by it */
  int64_t step;         /* global steps done after this epoch */
  int64_t samples;      /* training samples this worker processed this epoch */
  double loss_sum;      /* sum of per-sample training losses (PSHARD_LOSS_MEANS: their mean) */
  int64_t correct;      /* training argmax hits */
  int64_t test_samples; /* test samples this worker evaluated; < 0: no evaluation */
  double test_loss_sum; /* likewise, of the test losses */
  int64_t test_correct;
  double epoch_s;        /* wall time of the training part of the epoch */
  double eval_s;         /* wall time of the evaluation */
  double data_s;         /* of epoch_s: waiting for batches (< 0: not measured) */
  double forward_s;      /* of epoch_s: forward passes and the loss (< 0: not measured) */
  double backward_s;     /* of epoch_s: backward passes, pushes issued included (< 0: not measured) */
  uint32_t figures;      /* PSHARD_TRAIN_LOSS | PSHARD_TRAIN_ACC | ...: what loss_sum ... test_correct measured */
  double loss_scale;     /* PSHARD_LOSS_SCALING: the loss scale at the end of the epoch */
  int64_t skipped_steps; /* PSHARD_LOSS_SCALING: steps of the epoch this worker skipped (gradients not finite) */
  int64_t label;         /* the epoch's number as the program counts it (from 0, 1 or anything, increasing), recorded
                            as the epoch line's "epoch" */
} pshard_epoch_report;

int pshard_report_epoch(pshard_client* c, const pshard_epoch_report* report);

/* A figure of the program's own for its next epoch report, by name (e.g. "test_auc", "test_logloss"): the "epoch"
 * event's "figures" object holds each name's mean over the ranks that reported it, weighted by their test_samples
 * (or, when they did not evaluate, their samples); the summary holds the last epoch's. A name given twice before a
 * report keeps the last value; the value may be NaN or infinite (recorded as "nan", "inf", "-inf"). ARGUMENT for a
 * name that is not 1-64 characters of [A-Za-z0-9_] starting with a letter, or a 17th name before a report; a
 * refused figure also drops those given since the last report. */
int pshard_report_figure(pshard_client* c, const char* name, double value);

/* ---- Timeline (trace.steps; docs/METRICS.md "Timeline") ----------------------------------------------------- */

/* 1 when step `step` is in the job's trace window (trace.steps / pshard launch --trace A-B), else 0. The library
 * itself records every pull and push_pull of a traced step (issued to done, on the "requests" row) and writes
 * RUN_DIR/trace/worker-R.json at pshard_close, for `pshard report` to merge with the other processes'. */
int pshard_traces(const pshard_client* c, int64_t step);
/* A span of the caller's own (e.g. "forward", "backward") on the calling thread's row: start_ns and end_ns on
 * CLOCK_MONOTONIC (Python: time.monotonic_ns()). category: "step", "phase", "layer", "comm", anything else is
 * "user". Recorded only when `step` is traced (a no-op otherwise, so it may be called every step). */
int pshard_trace_span(pshard_client* c, const char* name, const char* category, int64_t step, int64_t start_ns,
                      int64_t end_ns);

#ifdef __cplusplus
}
#endif

#endif /* PSHARD_C_H_ */
