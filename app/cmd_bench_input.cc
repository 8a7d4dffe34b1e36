// `pshard bench input`: images/s of the image-folder input pipeline (read, decode, random resized crop, flip,
// normalise).
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "app/bench.h"
#include "common/error.h"
#include "common/util/args.h"
#include "worker/data/batch_loader.h"
#include "worker/data/image_folder.h"
#include "worker/data/sampler.h"

namespace pshard::app {
namespace {

int run_bench_input(const std::vector<std::string>& args) {
  ArgParser p("pshard bench input",
              "training batches of an image folder through the loader a worker uses (prefetch thread + decode "
              "threads: read, decode, random resized crop, flip, normalise with ImageNet's mean/std); prints images/s");
  p.add_option("dir", "DIR", "image folder (DIR/CLASS/IMAGE.jpg)", true);
  p.add_option("image-size", "N", "output side", false, "224");
  p.add_option("threads", "T", "decode threads (data.decode_threads)", false, "2");
  p.add_option("batch", "N", "images per batch", false, "32");
  p.add_option("batches", "N", "timed batches (cycling over the folder's epochs)", false, "20");
  p.add_option("prefetch", "N", "batches assembled ahead (data.prefetch)", false, "2");
  p.add_flag("json", "print one JSON object");
  if (!p.parse(args)) return 0;
  const int64_t batch = p.get_int("batch"), batches = p.get_int("batches");
  if (batch < 1 || batches < 1) throw Error("pshard bench input: --batch and --batches must be >= 1");
  data::ImageFolderScan scan = data::scan_image_folder(p.get("dir"));
  for (const std::string& s : scan.skipped) std::fprintf(stderr, "image-folder: skipped %s\n", s.c_str());
  data::ImageTransform t;
  t.image_size = static_cast<int>(p.get_int("image-size"));
  t.threads = static_cast<int>(p.get_int("threads"));
  t.stats.mean = {0.485f, 0.456f, 0.406f};
  t.stats.std = {0.229f, 0.224f, 0.225f};
  data::Dataset d;
  d.name = "image-folder";
  d.sample_shape = {3, t.image_size, t.image_size};
  d.num_classes = static_cast<int64_t>(scan.classes.size());
  std::vector<std::string> paths;
  for (const data::ImageFile& f : scan.files) {
    paths.push_back(f.path);
    d.labels.push_back(f.label);
  }
  d.source = std::make_shared<data::ImageSource>(std::move(paths), t);
  if (d.size() < batch) throw Error("pshard bench input: the folder has fewer images than one batch");
  data::BatchLoader loader(d, data::ShardSampler(d.size(), 0, 1, 1), batch, static_cast<int>(p.get_int("prefetch")));
  data::Batch b;
  int64_t epoch = 0;
  loader.start_epoch(epoch);
  auto next = [&] {
    while (!loader.next(&b)) loader.start_epoch(++epoch);
  };
  next();  // warm-up: the first batch also starts the threads
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < batches; ++i) next();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double rate = static_cast<double>(batches * batch) / s;
  if (p.flag("json")) {
    std::printf("{\"images_per_s\": %.2f, \"images\": %lld, \"seconds\": %.4f, \"threads\": %d, \"image_size\": %d}\n",
                rate, static_cast<long long>(batches * batch), s, t.threads, t.image_size);
  } else {
    std::printf("input pipeline: %.1f images/s (%lld images of %dx%d in %.3f s, %d decode threads)\n", rate,
                static_cast<long long>(batches * batch), t.image_size, t.image_size, s, t.threads);
  }
  return 0;
}

}  // namespace

PSHARD_BENCH(input, "image-folder input pipeline: decode + random resized crop + flip + normalise (images/s)",
             run_bench_input);

}  // namespace pshard::app
