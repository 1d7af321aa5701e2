"""One server on several hosts: the topology a plan's `service.nodes` describes (pure), the
gate that orders the nodes' starts during an apply, and what `ray status` says.

    topology.py   head and workers, their addresses, the parallel layout, each node's argv
    gate.py       the nodes' vote (restart the group or not) and the start order
    ray_status.py `ray status` text -> active nodes and GPUs
"""
