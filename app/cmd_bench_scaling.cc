// `pshard bench scaling`: the same job at several worker counts, then speedup/efficiency/bandwidth tables.
#include "app/bench.h"
#include "report/scaling_bench.h"

namespace pshard::app {

PSHARD_BENCH(scaling, "the same job at each worker count: speedup, efficiency, compute vs communication",
             ::pshard::report::run_scaling_bench);

}  // namespace pshard::app
