"""Run by the real vLLM 0.17.1 venv's python (not by the test process): parse each command
line given on stdin (JSON: a list of argv lists, each starting at `serve`) with vLLM's own
`vllm serve` parser, then apply vLLM's own checks of the parsed arguments: the serve
validation, the engine arguments' construction, the registries of reasoning and tool call
parsers and the attention backend enum. Prints one JSON object per command line.

On a host without GPU, vLLM cannot build its parser (the device config fails); like
`vllm bench` does there, this swaps in vLLM's CPU platform first.
"""

import contextlib
import io
import json
import sys

from vllm import platforms

if platforms.current_platform.is_unspecified():
    from vllm.platforms.cpu import CpuPlatform

    platforms.current_platform = CpuPlatform()


def check(argv):
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager
    from vllm.utils.argparse_utils import FlexibleArgumentParser
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    parser = FlexibleArgumentParser(prog="vllm")
    command = ServeSubcommand()
    command.subparser_init(parser.add_subparsers(dest="subparser"))
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            args = parser.parse_args(argv)
    except SystemExit:  # argparse says why on stderr, then exits 2
        return {"ok": False, "stage": "parse", "error": said.getvalue().strip().splitlines()[-1]}
    try:
        command.validate(args)
        AsyncEngineArgs.from_cli_args(args)
        if args.reasoning_parser and args.reasoning_parser not in ReasoningParserManager.list_registered():
            raise KeyError(f"reasoning parser {args.reasoning_parser!r} is not registered")
        if args.tool_call_parser and args.tool_call_parser not in ToolParserManager.list_registered():
            raise KeyError(f"tool call parser {args.tool_call_parser!r} is not registered")
        if args.attention_backend:
            AttentionBackendEnum[args.attention_backend]
    except Exception as error:  # whatever vLLM raised is the answer
        return {"ok": False, "stage": "validate", "error": f"{type(error).__name__}: {error}"}
    return {"ok": True, "model": args.model_tag, "tensor_parallel_size": args.tensor_parallel_size}


for argv in json.load(sys.stdin):
    print(json.dumps(check(argv)), flush=True)
