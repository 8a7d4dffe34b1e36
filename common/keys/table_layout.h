// Embedding tables: where each row lives (which server, at which local index) and the values a row starts with.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pshard {

// How a table's rows start.
enum class TableInit { kNormal, kUniform, kZeros };

// One embedding table: `rows` rows of `dim` float32 values that only the servers hold.
struct TableSpec {
  std::string name;  // unique among the job's tables
  uint64_t rows = 0;
  uint32_t dim = 0;
  TableInit init = TableInit::kNormal;
  float init_scale = 1.0f;  // standard deviation (normal, nn.Embedding's default 1) or bound (uniform)
  // Hashed tables: ids are any 64-bit values (hashed feature ids), not row indices; `rows` is the most rows the
  // table holds (each server its share), and a row is made from its id the first time a step's pushes hold it.
  bool hashed = false;
  uint32_t admit_after = 0;  // hashed: a row is stored once pushes held it in this many steps (0, 1: the first)
  int64_t expire_after = 0;  // hashed: a row no push held for this many steps is dropped (0: never)
  // The servers store the rows as bfloat16 (embedding.storage = bf16): half the bytes; each update is computed in
  // float32 from the stored row and rounded to nearest even; the rows' optimizer state stays float32.
  bool bf16 = false;
};

// Rows are dealt to the servers one by one: row r lives on server r mod S, as its local row r div S. Batches drawn
// from a skewed (Zipf) id distribution hit the low ids most; dealing single rows spreads those over every server
// instead of giving one server the hot block.
//
//   const uint32_t s = table_server(id, num_servers);
//   const uint64_t local = table_local_row(id, num_servers);
//   const uint64_t held = table_rows_on(spec.rows, num_servers, s);   // rows server s holds
inline uint32_t table_server(uint64_t row, uint32_t num_servers) { return static_cast<uint32_t>(row % num_servers); }
inline uint64_t table_local_row(uint64_t row, uint32_t num_servers) { return row / num_servers; }
inline uint64_t table_global_row(uint64_t local, uint32_t server, uint32_t num_servers) {
  return local * num_servers + server;
}
inline uint64_t table_rows_on(uint64_t rows, uint32_t num_servers, uint32_t server) {
  return rows / num_servers + (server < rows % num_servers ? 1 : 0);
}

// The values row `row` of `spec` starts with (spec.dim floats into out): each value a function of (seed, the table's
// name, row, column) alone, so every server makes its rows without a worker sending them, and a restarted server or
// a test makes the same ones.
void table_initial_row(const TableSpec& spec, uint64_t seed, uint64_t row, float* out);

// Throws pshard::Error naming the table when a spec is unusable: an empty or repeated name, 0 rows or dim, more than
// 2^62 values, or a negative or non-finite init scale.
void check_table_specs(const std::vector<TableSpec>& tables);

// "user_id (1000000 x 16)" for messages; "user_id (hashed, up to 1000000 x 16)" for a hashed table.
std::string describe_table(const TableSpec& spec);

}  // namespace pshard
