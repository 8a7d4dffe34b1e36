"""examples/torch/fmnist_cnn.py with 2 workers and 1 server (configs/torch_fmnist_cnn.toml) reaches its test accuracy
in the given mode: sync >= 90 %, async and ssp >= 88 % (the run's summary, combined from both workers' shares).

    fmnist_accuracy_test.py MODE MIN_ACCURACY
"""
import json
import os
import sys
import time

import support

DATA = "/usr/share/datasets/fashion-mnist"


def main(mode, minimum):
    if not os.path.exists(os.path.join(DATA, "train-images-idx3-ubyte.gz")):
        print("skipped: no Fashion-MNIST at %s (Debian: dataset-fashion-mnist)" % DATA)
        return
    with open(os.path.join(support.SOURCE_DIR, "configs", "torch_fmnist_cnn.toml")) as f:
        config = f.read()
    t0 = time.time()
    status, output, run_dir = support.launch(
        config, 2, 1, [os.path.join(support.SOURCE_DIR, "examples", "torch", "fmnist_cnn.py"), "--data", DATA], 600,
        "fmnist-" + mode, extra=["--set", "cluster.mode=" + mode])
    took = time.time() - t0
    support.expect(status == 0, "%s: the job failed (status %d)" % (mode, status), output)
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        summary = json.loads(f.read().splitlines()[-1])
    acc = summary.get("test_acc")
    support.expect(acc is not None and acc >= minimum, "%s: test accuracy %s < %.2f" % (mode, acc, minimum), output)
    print("%s: test accuracy %.4f >= %.2f after %d epochs, %.0f s" % (mode, acc, minimum, summary["epochs"], took))


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]))
    support.passed()
