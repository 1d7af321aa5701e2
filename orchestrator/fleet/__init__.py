"""The fleet's moves after its replicas run: the rolling redeploy behind the router
(`roll.py`), the drain that lets a replica's requests finish first (`drain.py`), and the
repair after faults (`watch.py`: replicas the router lost, a router that came back empty).
The apply (`apply/`) provides the per-replica work through `member.ReplicaOps`."""
