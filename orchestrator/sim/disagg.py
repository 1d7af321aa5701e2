"""Prefill/decode disaggregation, simulated: vLLM's `--kv-transfer-config` and the NIXL protocol.

A P/D pair is two servers behind a proxy (vllm-router `--vllm-pd-disaggregation`): the proxy
sends the request to the prefill server with `max_tokens: 1` and `kv_transfer_params:
{"do_remote_decode": true, ...}`; that server computes the prompt and answers with
`kv_transfer_params` naming where its KV blocks are (engine id, block ids, side-channel host
and port). The proxy then sends the original request to the decode server with those
parameters (`do_remote_prefill: true`); the decode server pulls the prompt's KV over the link
instead of computing it, recomputes the last prompt token (as vLLM's scheduler does when the
whole prompt is external) and generates the answer.

What the simulator models of it: the decode server pays the transfer, `prompt tokens x KV
bytes per token per GPU / link bandwidth per GPU` model seconds (every GPU of the replica
pulls its own share in parallel; transfers share the link one at a time, in arrival order),
and counts the tokens as transferred, not computed. Not modelled: the prefill server holding
the blocks until they are read, NIXL's handshake, failed or expired transfers.
"""

from __future__ import annotations

import argparse
import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from orchestrator.sim.argtypes import json_object, positive

ROLES = ("kv_producer", "kv_consumer", "kv_both")
NIXL = "NixlConnector"
DEFAULT_LINK_GBPS = 100.0  # Gbit/s per GPU: one 100 Gb/s RDMA NIC per GPU
# What a prefill server advertises: vLLM's VLLM_NIXL_SIDE_CHANNEL_HOST / _PORT, or their
# defaults (two real servers on one host need two ports).
SIDE_CHANNEL_HOST = "localhost"
SIDE_CHANNEL_PORT = 5600
# Without these in do_remote_prefill parameters, vLLM's NixlConnector computes the prompt
# locally ("Got invalid KVTransferParams").
REMOTE_FIELDS = ("remote_engine_id", "remote_block_ids", "remote_host", "remote_port")


@dataclass
class KvTransfer:
    """The server's `--kv-transfer-config`, and the link its transfers cross."""

    connector: str
    role: str
    engine_id: str
    link_gbps: float = DEFAULT_LINK_GBPS
    side_channel: tuple[str, int] = (SIDE_CHANNEL_HOST, SIDE_CHANNEL_PORT)
    next_block: int = 0  # block ids stay unique while the server runs, as a block table's

    @property
    def nixl(self) -> bool:
        return self.connector == NIXL

    def seconds(self, tokens: int, bytes_per_token: float) -> float:
        """Model seconds to pull `tokens` tokens' KV over one GPU's link."""
        return tokens * bytes_per_token * 8 / (self.link_gbps * 1e9)

    def produced(self, request_id: str, prompt_tokens: int, block_size: int,
                 tensor_parallel: int) -> dict[str, Any]:
        """The `kv_transfer_params` a prefill server answers with (NixlConnector's names)."""
        first = self.next_block
        self.next_block += math.ceil(prompt_tokens / block_size)
        return {
            "do_remote_prefill": True,
            "do_remote_decode": False,
            "remote_block_ids": list(range(first, self.next_block)),
            "remote_engine_id": self.engine_id,
            "remote_request_id": request_id,
            "remote_host": self.side_channel[0],
            "remote_port": self.side_channel[1],
            "tp_size": tensor_parallel,
        }


@dataclass(frozen=True)
class Part:
    """What one request asks of this server: the whole request, its prefill, or its decode."""

    prefill_only: bool = False  # do_remote_decode: compute the prompt, answer with params
    remote_tokens: int = 0  # do_remote_prefill: prompt tokens whose KV arrives by transfer
    note: str = ""  # why parameters were not followed (logged)


WHOLE = Part()


def parse_config(text: str) -> dict[str, Any]:
    """--kv-transfer-config: a JSON object with `kv_connector` and `kv_role` (vLLM's rules)."""
    value = json_object(text)
    connector, role = value.get("kv_connector"), value.get("kv_role")
    if not isinstance(connector, str) or not connector:
        raise argparse.ArgumentTypeError(
            f"kv_connector: expected a connector name such as {NIXL!r}, got {connector!r}")
    if role not in ROLES:
        raise argparse.ArgumentTypeError(
            f"kv_role: expected one of {', '.join(ROLES)} when kv_connector is set, got {role!r}")
    return value


def _gbps(text: str) -> float:
    return positive(text, "Gbit/s", "100")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kv-transfer-config", type=parse_config, default=None, metavar="JSON",
        help="vLLM's KV connector config, e.g. '{\"kv_connector\":\"NixlConnector\","
             "\"kv_role\":\"kv_both\"}': serve the prefill or decode half of P/D requests")
    parser.add_argument(
        "--kv-link-gbps", type=_gbps, default=DEFAULT_LINK_GBPS, metavar="GBIT",
        help="KV transfer link bandwidth per GPU in Gbit/s (simulator; default "
             f"{DEFAULT_LINK_GBPS:g})")


def from_args(args: argparse.Namespace, environ: Mapping[str, str]) -> KvTransfer | None:
    config = args.kv_transfer_config
    if config is None:
        return None
    engine_id = config.get("engine_id") or str(uuid.uuid4())
    port = environ.get("VLLM_NIXL_SIDE_CHANNEL_PORT", "")
    side_channel = (environ.get("VLLM_NIXL_SIDE_CHANNEL_HOST") or SIDE_CHANNEL_HOST,
                    int(port) if port.isdigit() else SIDE_CHANNEL_PORT)
    return KvTransfer(config["kv_connector"], config["kv_role"], str(engine_id),
                      args.kv_link_gbps, side_channel)


def plan(params: Any, config: KvTransfer | None, prompt_tokens: int) -> Part:
    """What `kv_transfer_params` ask of this server. Raises ValueError for a request its
    role cannot serve; without a connector the parameters are ignored, as by vLLM."""
    if config is None or not isinstance(params, dict):
        return WHOLE
    if params.get("do_remote_decode"):
        if config.role == "kv_consumer":
            raise ValueError("kv_transfer_params.do_remote_decode: this server's kv_role is "
                             "kv_consumer, it cannot produce KV for a remote decode")
        return Part(prefill_only=True)
    if params.get("do_remote_prefill"):
        if config.role == "kv_producer":
            raise ValueError("kv_transfer_params.do_remote_prefill: this server's kv_role is "
                             "kv_producer, it cannot consume remote KV")
        missing = [name for name in REMOTE_FIELDS if params.get(name) is None]
        if missing:
            return Part(note=f"Got invalid KVTransferParams (missing {', '.join(missing)}): "
                             "computing the prompt locally")
        # The last prompt token is computed here: the first output token needs it.
        return Part(remote_tokens=max(0, prompt_tokens - 1))
    return WHOLE
