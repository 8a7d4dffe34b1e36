// What the dashboard's page reads of a run: the complete lines of RUN_DIR/metrics.jsonl after a byte offset, so that
// a page polling once a second gets each line once, however long the run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace pshard::report::dashboard {

struct FeedChunk {
  std::string lines;    // whole lines ('\n'-terminated), possibly none
  uint64_t next = 0;    // the offset to ask from next time
  std::string file_id;  // which file this is ("device:inode"; "" while there is none)
  bool reset = false;   // the page must forget what it read: the file is another one (a resumed run writes a new
                        // metrics.jsonl) or shorter than the offset asked for
};

// The lines of `path` from byte `from` on, at most about `max_bytes` of them (always at least one whole line when
// there is one). `file_id` is what the page's previous chunk said ("" at first): when the file at `path` is no longer
// that one, reading starts again at 0 with `reset`. A file that does not exist (yet) gives an empty chunk; a file
// that cannot be read throws pshard::Error naming it.
//
//   FeedChunk c = read_metrics_feed(run_dir + "/metrics.jsonl", 0, "", 4 << 20);
//   ... later: read_metrics_feed(path, c.next, c.file_id, 4 << 20)
FeedChunk read_metrics_feed(const std::string& path, uint64_t from, const std::string& file_id, size_t max_bytes);

}  // namespace pshard::report::dashboard
