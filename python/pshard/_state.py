"""What the framework adapters keep per process (the DistributedOptimizer of the job), cleared by shutdown()."""
optimizer = None
# Elastic jobs: the plan of the epoch being trained (epoch, first step, this rank's index among the members, their
# number), from torch.epoch_plan().
plan = None
# checkpoint.on_sigterm = checkpoint: this process got SIGTERM (init() installs the handler; DistributedOptimizer
# flags the next step's pushes). Not cleared by forget().
sigterm = False
# The embedding tables this process declared (pshard.embedding), in table-id order; DistributedOptimizer pushes their
# rows' gradients at each step().
tables = []


def forget():
    global optimizer, plan, tables
    optimizer = None
    plan = None
    tables = []
