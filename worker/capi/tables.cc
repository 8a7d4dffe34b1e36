// The C API's embedding tables (pshard_c.h): their declaration, and row pulls and pushes.
#include <cmath>
#include <string>

#include "worker/capi/client.h"
#include "worker/capi/pshard_c.h"

using namespace pshard::capi;  // the C API's own helpers (client.h)

namespace {

// Both declarations: the spec checked with the tables declared before it.
int add_table(pshard_client* c, const char* name, pshard::TableSpec spec, int dim, int init, double init_scale) {
  return guarded(PSHARD_ERR_INTERNAL, [&]() -> int {
    require(c, "client");
    require(name, "name");
    const std::string table = std::string("pshard: embedding table '") + name + "'";
    if (c->kv) throw Failure{PSHARD_ERR_STATE, table + " declared after pshard_start"};
    if (init < PSHARD_INIT_NORMAL || init > PSHARD_INIT_ZEROS) {
      throw Failure{PSHARD_ERR_ARGUMENT,
                    table + ": init " + std::to_string(init) + " is not PSHARD_INIT_NORMAL, _UNIFORM or _ZEROS"};
    }
    if (dim < 1) throw Failure{PSHARD_ERR_ARGUMENT, table + ": dim " + std::to_string(dim) + " is not >= 1"};
    spec.name = name;
    spec.dim = static_cast<uint32_t>(dim);
    spec.init = init == PSHARD_INIT_UNIFORM ? pshard::TableInit::kUniform
                : init == PSHARD_INIT_ZEROS ? pshard::TableInit::kZeros
                                            : pshard::TableInit::kNormal;
    spec.init_scale = static_cast<float>(init_scale);
    spec.bf16 = c->cfg.get_string("embedding.storage") == "bf16";
    if (!std::isfinite(init_scale) || init_scale > 1e30) spec.init_scale = NAN;  // refused below
    std::vector<pshard::TableSpec> all = c->tables;
    all.push_back(spec);
    try {
      pshard::check_table_specs(all);
    } catch (const pshard::Error& e) {
      throw Failure{PSHARD_ERR_ARGUMENT, std::string("pshard: ") + e.what()};
    }
    c->tables.push_back(spec);
    return static_cast<int>(c->tables.size() - 1);
  });
}

}  // namespace

extern "C" {

int pshard_add_table(pshard_client* c, const char* name, uint64_t rows, int dim, int init, double init_scale) {
  pshard::TableSpec spec;
  spec.rows = rows;
  return add_table(c, name, spec, dim, init, init_scale);
}

int pshard_add_hashed_table(pshard_client* c, const char* name, uint64_t capacity, int dim, int init, double init_scale,
                            uint32_t admit_after, int64_t expire_after) {
  pshard::TableSpec spec;
  spec.rows = capacity;
  spec.hashed = true;
  spec.admit_after = admit_after;
  spec.expire_after = expire_after;
  return add_table(c, name, spec, dim, init, init_scale);
}

int pshard_pull_rows(pshard_client* c, int table, const uint64_t* ids, size_t n, float* out, int64_t step,
                     pshard_request* req) {
  return guarded(PSHARD_ERR_SERVER, [&]() -> int {
    require(c, "client");
    c->check_table(table);
    if (n > 0) {
      require(ids, "ids");
      require(out, "out");
    }
    require(req, "req");
    if (step < 0) throw Failure{PSHARD_ERR_ARGUMENT, "pshard: step must be >= 0, got " + std::to_string(step)};
    try {
      *req = c->track(c->kv->row_pull(static_cast<uint32_t>(table), ids, n, out, step));
    } catch (const pshard::KvError&) {
      throw;
    } catch (const pshard::Error& e) {  // a row outside the table, or twice: the caller's list
      throw Failure{PSHARD_ERR_ARGUMENT, std::string("pshard: ") + e.what()};
    }
    return PSHARD_OK;
  });
}

int pshard_push_rows(pshard_client* c, int table, const uint64_t* ids, size_t n, const float* grads, int64_t step,
                     pshard_request* req) {
  return guarded(PSHARD_ERR_SERVER, [&]() -> int {
    require(c, "client");
    c->check_table(table);
    if (n > 0) {
      require(ids, "ids");
      require(grads, "grads");
    }
    require(req, "req");
    if (step < 0) throw Failure{PSHARD_ERR_ARGUMENT, "pshard: step must be >= 0, got " + std::to_string(step)};
    try {
      *req = c->track(c->kv->row_push(static_cast<uint32_t>(table), ids, n, grads, step));
    } catch (const pshard::KvError&) {
      throw;
    } catch (const pshard::Error& e) {
      throw Failure{PSHARD_ERR_ARGUMENT, std::string("pshard: ") + e.what()};
    }
    return PSHARD_OK;
  });
}

}  // extern "C"
