"""The vLLM-compatible simulator behind `orch sim serve` (see docs/simulator.md).

    serve.py         the process: bind, start-up, listen, serve, shut down or crash
    options.py       its flags, plus vLLM's flags accepted and ignored
    startup.py       the start-up log, timed by the profile; failures.py the crash texts
    profiles.py      throughput and start-up profiles, calibrated to the motivating run
    deployment.py    a profile at the flags given (TP, DP, EP, memory): the what-if model's
    scheduler.py     continuous batching as pure logic; engine.py runs it on the clock
    calibration.py   the same model in virtual time (what a profile predicts)
    textgen.py       token text and response lengths; answers.py what the model knows
    http11.py        a small HTTP/1.1 server; app.py the routes; api_requests.py the bodies
    sinks.py         tokens to SSE chunks or whole responses; wire.py their exact bytes
    metrics.py       /metrics; logs.py vLLM's log line format; versions.py wire differences
    testing.py       run it as a subprocess in tests of other parts
    hub.py           `orch sim hub`: a stand-in Hugging Face hub; hub_store.py its repositories,
                     hub_files.py byte ranges and cut downloads, hub_cli.py its command line
"""
