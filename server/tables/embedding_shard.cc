// EmbeddingShard: a table's rows on one server, made from the seed and updated row by row.
#include "server/tables/embedding_shard.h"

#include <utility>

namespace pshard {

EmbeddingShard::EmbeddingShard(TableSpec spec, uint32_t server, uint32_t num_servers, uint64_t seed,
                               const optim::Optimizer& optimizer)
    : spec_(std::move(spec)),
      server_(server),
      num_servers_(num_servers),
      local_rows_(table_rows_on(spec_.rows, num_servers, server)),
      state_per_row_(optimizer.state_floats() * spec_.dim),
      values_(local_rows_ * spec_.dim),
      state_(local_rows_ * state_per_row_, 0.0f) {
  for (uint64_t i = 0; i < local_rows_; ++i) {
    table_initial_row(spec_, seed, table_global_row(i, server_, num_servers_), values_.data() + i * spec_.dim);
  }
}

void EmbeddingShard::apply(const uint64_t* rows, const float* grads, size_t n, const optim::Optimizer& optimizer,
                           float lr, int64_t t) {
  const size_t dim = spec_.dim;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t l = local(rows[i]);
    // The rule sees one row as n = dim elements with its state planes right after one another (state_floats x dim).
    optimizer.apply(values_.data() + l * dim, grads + i * dim, state_.data() + l * state_per_row_, dim, lr, t);
  }
}

}  // namespace pshard
