"""What the framework adapters keep per process (the DistributedOptimizer of the job), cleared by shutdown()."""
optimizer = None


def forget():
    global optimizer
    optimizer = None
