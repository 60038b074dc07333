"""Lecture 7, mixture of experts and expert parallelism: the manifest.

Every expected value is one process's computation in NumPy (float64): the
routing, or one dense MoE layer with every token on one process (nn.Moe),
of which each rank must hold its own tokens' outputs and its own experts'
gradients. How it was computed is checked from every message (PMPI) and
from the experts' calls each rank made (the lecture's kit logs them: which expert, how
many tokens, and the exchanges pending while it ran).
"""

from lectures.lc7_ep.gshard import gshard_backward, gshard_forward
from lectures.lc7_ep.hierdispatch import hierarchical_moe_forward
from lectures.lc7_ep.layer import moe_backward, moe_forward
from lectures.lc7_ep.overlap import experts_exchange, moe_overlap_forward
from lectures.lc7_ep.shared import shared_moe_backward, shared_moe_forward
from lectures.lc7_ep.routing import (gate_bias_update, gate_sigmoid_forward, seq_balance_loss,
                                     topk_backward, topk_forward)
from lectures.lc7_ep.events import ExpertCall
from lectures.lc7_ep.nodelimit import node_limited_backward, node_limited_forward

TITLE = "mixture of experts and expert parallelism"

# The report time of make grade LC=N SOL=1 on a 2-core machine (measured; the README's table).
GRADE_SECONDS = 1

# What the lecture's kit logs in a case record (events.py registers each kind's parser).
KIT_EVENTS = [ExpertCall]

TESTS = [topk_forward, topk_backward,
         gate_sigmoid_forward, gate_bias_update, seq_balance_loss,
         node_limited_forward, node_limited_backward,
         moe_forward, moe_backward,
         gshard_forward, gshard_backward,
         hierarchical_moe_forward,
         shared_moe_forward, shared_moe_backward,
         experts_exchange,
         moe_overlap_forward]

DEMOS = {"topk_gradient": ["dlogits equals the dense softmax's gradient through the chosen: yes"],
         "node_limited_routing": ["M = 2 nodes: experts 4 5 2 3",
                                  "dscores equals the central differences: yes"],
         "gate_sigmoid": ["the bias never weighs: w equals the chosen scores normalised: yes",
                          "uniform routing's loss equals alpha: yes",
                          "dlogits equals the loss's central differences: yes"],
         "moe_forward": ["y agrees with a dense computation: yes"],
         "moe_backward": ["gradients agree with finite differences: yes"],
         "gshard": ["y, dx, dwr and dexperts: matches one process: yes"],
         "hierarchical_dispatch": ["y matches the layer on one process: yes"],
         "moe_shared_expert": ["y matches the layer on one process: yes"],
         "all2all_async": ["every row's output matches one process: yes"],
         "moe_overlap": ["y matches one process: yes"]}
