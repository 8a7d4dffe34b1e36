"""What the framework adapters keep per process (the DistributedOptimizer of the job), cleared by shutdown()."""
optimizer = None
# checkpoint.on_sigterm = checkpoint: this process got SIGTERM (init() installs the handler; DistributedOptimizer
# flags the next step's pushes). Not cleared by forget().
sigterm = False


def forget():
    global optimizer
    optimizer = None
