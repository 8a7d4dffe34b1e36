"""examples/torch/cifar_resnet18.py runs: torchvision's ResNet-18, 2 workers + 1 server, one short epoch of synthetic
CIFAR-shaped images on the CPU; every parameter moved through the servers and the run's metrics were written."""
import json
import os

import support


def main():
    try:
        import torchvision  # noqa: F401
    except ImportError:
        print("skipped: torchvision is not installed (Debian: python3-torchvision)")
        return
    with open(os.path.join(support.SOURCE_DIR, "configs", "torch_cifar_resnet18.toml")) as f:
        config = f.read()
    status, output, run_dir = support.launch(
        config, 2, 1, [os.path.join(support.SOURCE_DIR, "examples", "torch", "cifar_resnet18.py"), "--synthetic-size",
                       "128", "--device", "cpu"], 240, "cifar",
        extra=["--set", "train.epochs=1", "--set", "train.batch_size=16", "--set", "lr_schedule.warmup_steps=0"])
    support.expect(status == 0, "the job failed (status %d)" % status, output)
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        events = [json.loads(line) for line in f]
    start, summary = events[0], events[-1]
    support.expect(start["event"] == "start" and start["model"] == "resnet18" and start["steps_per_epoch"] == 4,
                   "start line: %s" % start, output)
    # ResNet-18 with a 3x3 stem and 10 classes: 11,173,962 float32 parameters.
    support.expect(start["model_bytes"] == 11173962 * 4, "model_bytes %s" % start["model_bytes"], output)
    support.expect(summary["event"] == "summary" and summary["steps"] == 4 and summary["workers_finished"] == [0, 1],
                   "summary: %s" % summary, output)
    support.expect("images/s on this worker (cpu)" in output, "rank 0 did not print its throughput", output)
    print("cifar_resnet18.py: 4 steps of 2 x 16 synthetic images through 1 server")


if __name__ == "__main__":
    main()
    support.passed()
