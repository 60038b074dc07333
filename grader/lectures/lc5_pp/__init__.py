"""Lecture 5, pipeline parallelism: the manifest.

Every expected value is one process's training step on the whole batch in
NumPy (float64, grader/nn.py's Mlp), the loss a mean over the batch; each
rank's stage gradients are compared with their slice of the whole model's.
How the step was computed is checked from the stage calls each rank logged
(their order against the schedule's definition, replayed in unit time) and
from every point-to-point message (PMPI).
"""

from lectures.lc5_pp.basic import pp_basic_step, pp_layers
from lectures.lc5_pp.checkpoint import checkpoint_step
from lectures.lc5_pp.dualpipe import pp_dualpipe_refuses, pp_dualpipe_step
from lectures.lc5_pp.interleaved import interleaved_refuses_m, pp_interleaved_step
from lectures.lc5_pp.onefb import pp_1f1b_step
from lectures.lc5_pp.parallel_3d import parallel_3d_step
from lectures.lc5_pp.schedule import demo_timeline
from lectures.lc5_pp.schedules import pp_gpipe_step
from lectures.lc5_pp.tied import tied_embedding_group, tied_pp_step
from lectures.lc5_pp.zero_bubble import pp_zero_bubble_step
from lectures.lc5_pp.events import StageCall

TITLE = "pipeline parallelism"

# The report time of make grade LC=N SOL=1 on a 2-core machine (measured; the README's table).
GRADE_SECONDS = 1

# The lectures whose kit and solutions this lecture's kit builds on (one line, read by make too):
# the tensor-parallel stage is lecture 4's decoder, solutions/lc4_tp/model_tp.c.
USES = ["lc4_tp"]

# What the lecture's kit logs in a case record (events.py registers each kind's parser).
KIT_EVENTS = [StageCall]

TESTS = [checkpoint_step, pp_layers, pp_basic_step, pp_gpipe_step, pp_1f1b_step,
         pp_interleaved_step, interleaved_refuses_m, pp_zero_bubble_step, pp_dualpipe_step,
         pp_dualpipe_refuses, parallel_3d_step, tied_embedding_group, tied_pp_step]

DEMOS = {"checkpoint": ["gradients agree with one process: yes"],
         "pp_basic": ["gradients agree with one process: yes"],
         "pp_gpipe": ["gradients agree with one process: yes"],
         "pp_1f1b": ["gradients agree with one process: yes"],
         "pp_interleaved": ["gradients agree with one process: yes"],
         "pp_zero_bubble": ["gradients agree with one process: yes"],
         "pp_dualpipe": ["gradients agree with one process: yes"],
         "parallel_3d": ["every rank's shard agree with one process: yes"],
         "pp_tied_embedding": ["the two copies of the tied matrix bit-identical after every "
                               "step: yes"]}

DEMO_AFTER = demo_timeline
