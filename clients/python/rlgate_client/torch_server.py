"""A vLLM-compatible HTTP endpoint over a torch Policy: what rlgate's gateway needs from vLLM for /v1/completions.

Routes (stdlib http.server, one thread per connection; generations interleave a token at a time under the policy's lock):
  POST /v1/completions   prompt as text or token ids, n, max_tokens, temperature, seed, logprobs,
                         return_token_ids, stream (one choice; stream_options.include_usage); answered as vLLM
                         (>= 0.10.2) answers it: choice-level prompt_token_ids and token_ids (when return_token_ids; in a
                         stream prompt_token_ids on the first chunk, each chunk's token_ids its delta), logprobs in the
                         completions layout (tokens, token_logprobs, top_logprobs, text_offset) when logprobs is set.
  POST /pause?mode=abort|wait|keep, POST /resume, GET /is_paused
                         weight updates as vLLM serves them (VLLM_SERVER_DEV_MODE=1; docs/weight-updates.md): an
                         abort-mode pause ends running answers with finish_reason "abort" (a stream with an abort chunk
                         and [DONE]), keep freezes them until the resume, wait answers once they ended.
  POST /tokenize {"prompt"} → {"count", "max_model_len", "tokens"}, POST /detokenize {"tokens"} → {"prompt"}
  GET  /v1/models        the served model (max_model_len = the model's positions)
  GET  /health           200
  GET  /version          {"version": ...}
  GET  /policy           {"model", "version", "paused"}: the policy version served now (the closed-loop harness waits on it)
  POST /update_weights?version=N   body: a state dict as torch.save writes it; the served weights become it, as
                         version N (the trainer's hand-off: torch_policy_process.py; between its pause and its resume)

`python3 -m rlgate_client.torch_server` serves a fresh TinyLM in a process of its own (its own interpreter and GIL:
sampling runs beside training, not between its steps) and prints one JSON line, {"event": "listening", "url"}, once it
answers.

Not served (a clear 400/404 instead): streams of several choices, chat completions (a character model has no chat
template), top_p / top_k / penalties other than their neutral values, echo, best_of. The stop token ends a generation
and stays in the text and the ids, so text re-encodes to the ids that were sampled.
"""
import argparse
import io
import json
import os
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs
from typing import Generator, Iterator, List, NamedTuple, Optional

import torch

from .torch_policy import DEFAULT_ALPHABET, CharTokenizer, Policy, build_model

VERSION = "rlgate-torch-example"
NEUTRAL = {"top_p": 1.0, "top_k": -1, "min_p": 0.0, "presence_penalty": 0.0, "frequency_penalty": 0.0, "repetition_penalty": 1.0}


class RequestError(Exception):
    def __init__(self, status: int, message: str, kind: str = "BadRequestError", param: Optional[str] = None):
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.param = param


def _error_body(e: RequestError) -> dict:
    # vLLM's error layout (OpenAI's): {"error": {"message", "type", "param", "code"}}
    return {"error": {"message": str(e), "type": e.kind, "param": e.param, "code": e.status}}


def _int(body: dict, key: str, default, low=None):
    value = body.get(key, default)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or (low is not None and value < low):
        raise RequestError(400, "%s: expected an integer%s" % (key, "" if low is None else " >= %d" % low), param=key)
    return value


def _prompts(policy: Policy, prompt) -> list:
    tok = policy.tokenizer
    if isinstance(prompt, str):
        items = [prompt]
    elif isinstance(prompt, list) and prompt and all(isinstance(p, int) and not isinstance(p, bool) for p in prompt):
        items = [prompt]
    elif isinstance(prompt, list) and prompt:
        items = prompt
    else:
        raise RequestError(400, "prompt: expected a string, token ids, or a non-empty list of them", param="prompt")
    out = []
    for p in items:
        try:
            if isinstance(p, str):
                ids = tok.encode(p)
            elif isinstance(p, list):
                tok.check_ids(p)
                ids = list(p)
            else:
                raise ValueError("expected a string or a list of token ids")
        except ValueError as e:
            raise RequestError(400, "prompt: %s" % e, param="prompt")
        if not ids:
            raise RequestError(400, "The decoder prompt cannot be empty", param="prompt")
        out.append(ids)
    return out


class CompletionRequest(NamedTuple):
    prompts: List[List[int]]
    n: int
    max_tokens: int
    logprobs: Optional[int]
    temperature: float
    seed: Optional[int]
    want_ids: bool
    stream: bool
    include_usage: bool


def parse_completion(policy: Policy, body: dict) -> CompletionRequest:
    """A /v1/completions body checked as this server serves it (RequestError where it does not)."""
    if not isinstance(body, dict):
        raise RequestError(400, "request body must be a JSON object")
    model = body.get("model")
    if model is not None and model != policy.name:
        raise RequestError(404, "The model `%s` does not exist." % model, kind="NotFoundError", param="model")
    for key in ("echo", "suffix"):
        if body.get(key):
            raise RequestError(400, "%s is not supported by this example server" % key, param=key)
    for key, neutral in NEUTRAL.items():
        if body.get(key) is not None and body[key] != neutral:
            raise RequestError(400, "%s: only %r (no effect) is supported by this example server" % (key, neutral), param=key)
    if body.get("best_of") not in (None, 1):
        raise RequestError(400, "best_of is not supported by this example server", param="best_of")
    n = _int(body, "n", 1, low=1)
    max_tokens = _int(body, "max_tokens", 16, low=1)
    logprobs = body.get("logprobs")
    if logprobs is not None and (not isinstance(logprobs, int) or isinstance(logprobs, bool) or not 0 <= logprobs <= 20):
        raise RequestError(400, "logprobs: expected an integer in [0, 20]", param="logprobs")
    temperature = body.get("temperature", 1.0)
    if temperature is None:
        temperature = 1.0
    if not isinstance(temperature, (int, float)) or isinstance(temperature, bool) or temperature < 0:
        raise RequestError(400, "temperature: expected a number >= 0", param="temperature")
    seed = body.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise RequestError(400, "seed: expected an integer", param="seed")
    prompts = _prompts(policy, body.get("prompt"))
    stream = body.get("stream") is True
    if stream and len(prompts) * n != 1:
        raise RequestError(400, "stream: this example server streams one choice of one prompt (n 1)", param="stream")
    options = body.get("stream_options")
    if options is not None and not stream:
        raise RequestError(400, "Stream options can only be defined when `stream=True`.", param="stream_options")
    for ids in prompts:
        if len(ids) + max_tokens > policy.model.max_len:
            raise RequestError(
                400,
                "prompt (%d tokens) + max_tokens (%d) exceeds the model's %d positions" % (len(ids), max_tokens, policy.model.max_len),
                param="max_tokens",
            )
    return CompletionRequest(
        prompts=prompts,
        n=n,
        max_tokens=max_tokens,
        logprobs=logprobs,
        temperature=float(temperature),
        seed=seed,
        want_ids=body.get("return_token_ids") is True,
        stream=stream,
        include_usage=isinstance(options, dict) and options.get("include_usage") is True,
    )


def _logprobs_json(policy: Policy, tokens, offset: int) -> dict:
    """The completions layout of `tokens`' logprobs, their text starting at character `offset`."""
    tok = policy.tokenizer
    pieces = [tok.decode([t.id]) for t in tokens]
    offsets = list(range(offset, offset + len(pieces)))  # one character per token
    top_json = []
    for t in tokens:
        entry = {tok.decode([t.id]): t.logprob}  # vLLM lists the sampled token beside the top ones
        for top_id, top_lp in t.top:
            entry.setdefault(tok.decode([top_id]), top_lp)
        top_json.append(entry)
    return {"text_offset": offsets, "token_logprobs": [t.logprob for t in tokens], "tokens": pieces, "top_logprobs": top_json}


def _head(policy: Policy) -> dict:
    return {"id": "cmpl-%s" % uuid.uuid4().hex, "object": "text_completion", "created": int(time.time()), "model": policy.name}


def _usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
        "prompt_tokens_details": None,
    }


def completions(policy: Policy, req: CompletionRequest) -> dict:
    """A whole (not streamed) answer; a choice an abort-mode pause ended has finish_reason "abort" and the tokens
    sampled by then, as vLLM returns it."""
    tok = policy.tokenizer
    choices = []
    prompt_tokens = 0
    completion_tokens = 0
    for p_index, ids in enumerate(req.prompts):
        prompt_tokens += len(ids)
        for c in range(req.n):
            index = p_index * req.n + c
            generation = policy.generate(ids, req.max_tokens, req.temperature, policy.generator(req.seed, index), top_n=req.logprobs or 0)
            tokens = list(generation)
            out = [t.id for t in tokens]
            completion_tokens += len(out)
            choices.append(
                {
                    "index": index,
                    "text": tok.decode(out),
                    "logprobs": _logprobs_json(policy, tokens, 0) if req.logprobs is not None else None,
                    "finish_reason": generation.finish_reason,
                    "stop_reason": None,
                    "prompt_logprobs": None,
                    "prompt_token_ids": ids if req.want_ids else None,
                    "token_ids": out if req.want_ids else None,
                }
            )
    return {
        **_head(policy),
        "choices": choices,
        "service_tier": None,
        "system_fingerprint": None,
        "usage": _usage(prompt_tokens, completion_tokens),
        "kv_transfer_params": None,
    }


def stream_completion(policy: Policy, req: CompletionRequest) -> Iterator[dict]:
    """A streamed answer's chunks as vLLM writes them (every field, nulls included), a token each: the last token's
    chunk carries finish_reason stop or length; an abort-mode pause ends the stream with a chunk of no text and
    finish_reason "abort". Then the usage chunk when asked for (the caller writes [DONE])."""
    tok = policy.tokenizer
    ids = req.prompts[0]
    head = _head(policy)
    generation = policy.generate(ids, req.max_tokens, req.temperature, policy.generator(req.seed, 0), top_n=req.logprobs or 0)
    sampled = 0
    for token in generation:
        last = token.id == tok.stop_id or sampled + 1 == req.max_tokens
        finish = ("stop" if token.id == tok.stop_id else "length") if last else None
        choice = {
            "index": 0,
            "text": tok.decode([token.id]),
            "logprobs": _logprobs_json(policy, [token], sampled) if req.logprobs is not None else None,
            "finish_reason": finish,
            "stop_reason": None,
            "prompt_token_ids": ids if req.want_ids and sampled == 0 else None,
            "token_ids": [token.id] if req.want_ids else None,
        }
        sampled += 1
        yield {**head, "choices": [choice], "usage": None}
    if generation.finish_reason == "abort":
        if sampled == 0 and req.want_ids:
            # Ended before its first token: the prompt ids still come first, on a chunk of their own (the gateway
            # passes an abort chunk on to nobody, so ids on it would be lost with it).
            yield {**head, "choices": [{"index": 0, "text": "", "logprobs": None, "finish_reason": None, "stop_reason": None,
                                        "prompt_token_ids": ids, "token_ids": []}], "usage": None}
        yield {**head, "choices": [{"index": 0, "text": "", "logprobs": None, "finish_reason": "abort", "stop_reason": None,
                                    "prompt_token_ids": None, "token_ids": [] if req.want_ids else None}], "usage": None}
    if req.include_usage:
        yield {**head, "choices": [], "usage": _usage(len(ids), sampled)}


def tokenize(policy: Policy, body) -> dict:
    """vLLM's POST /tokenize of a text prompt."""
    prompt = body.get("prompt") if isinstance(body, dict) else None
    if not isinstance(prompt, str):
        raise RequestError(400, "prompt: expected a string", param="prompt")
    try:
        ids = policy.tokenizer.encode(prompt)
    except ValueError as e:
        raise RequestError(400, "prompt: %s" % e, param="prompt")
    return {"count": len(ids), "max_model_len": policy.model.max_len, "tokens": ids, "token_strs": None}


def detokenize(policy: Policy, body) -> dict:
    """vLLM's POST /detokenize."""
    ids = body.get("tokens") if isinstance(body, dict) else None
    try:
        if not isinstance(ids, list):
            raise ValueError("expected a list of token ids")
        policy.tokenizer.check_ids(ids)
    except ValueError as e:
        raise RequestError(400, "tokens: %s" % e, param="tokens")
    return {"prompt": policy.tokenizer.decode(ids)}


def models(policy: Policy) -> dict:
    now = int(time.time())
    return {
        "object": "list",
        "data": [
            {
                "id": policy.name,
                "object": "model",
                "created": now,
                "owned_by": "vllm",
                "root": policy.name,
                "parent": None,
                "max_model_len": policy.model.max_len,
            }
        ],
    }


def update_weights(policy: Policy, query: str, raw: bytes) -> dict:
    """The trainer's new weights (torch.save bytes of the state dict) served from now on as version `version`. The
    trainer sends them while the gateways hold calls and the server is paused, so no token straddles two versions."""
    version = parse_qs(query).get("version", [""])[0]
    if not version.lstrip("-").isdigit():
        raise RequestError(400, "version: expected an integer", param="version")
    try:
        state = torch.load(io.BytesIO(raw))
    except Exception as e:
        raise RequestError(400, "body: not a state dict torch.save wrote (%s)" % e)
    try:
        policy.load(state, int(version))
    except RuntimeError as e:  # another model's weights
        raise RequestError(400, "body: %s" % e)
    return {"version": policy.version}


class _Handler(BaseHTTPRequestHandler):
    server_version = "rlgate-torch"
    protocol_version = "HTTP/1.1"  # keep-alive: the gateway pools its upstream connections

    def log_message(self, *args):  # quiet: the trainer prints its own lines
        pass

    def _send(self, status: int, body=None):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        policy = self.server.policy
        path = self.path.split("?", 1)[0]
        if path == "/health":
            return self._send(200)
        if path == "/v1/models":
            return self._send(200, models(policy))
        if path == "/version":
            return self._send(200, {"version": VERSION})
        if path == "/policy":
            return self._send(200, {"model": policy.name, "version": policy.version, "paused": policy.paused})
        if path == "/is_paused":
            return self._send(200, {"is_paused": policy.paused})
        self._send(404, {"error": {"message": "Not Found: %s" % path, "type": "NotFoundError", "param": None, "code": 404}})

    def _stream(self, chunks: Generator[dict, None, None]) -> None:
        """Server-sent events, each written (chunked) as soon as it is made; ends with [DONE]."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()

        def write(data: bytes) -> None:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        try:
            for chunk in chunks:
                write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            write(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        finally:
            chunks.close()  # a client that left ends its generation (it no longer counts as running)

    def do_POST(self):
        policy = self.server.policy
        path, _, query = self.path.partition("?")
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            if path == "/update_weights":
                return self._send(200, update_weights(policy, query, raw))
            try:
                body = json.loads(raw) if raw else None
            except ValueError as e:
                raise RequestError(400, "request body is not JSON: %s" % e)
            if path == "/v1/completions":
                req = parse_completion(policy, body)
                if req.stream:
                    return self._stream(stream_completion(policy, req))
                return self._send(200, completions(policy, req))
            if path == "/pause":
                mode = parse_qs(query).get("mode", ["abort"])[0]
                try:
                    policy.pause(mode)
                except ValueError as e:
                    raise RequestError(400, str(e), param="mode")
                return self._send(200, {"status": "paused"})
            if path == "/resume":
                policy.resume()
                return self._send(200, {"status": "resumed"})
            if path == "/tokenize":
                return self._send(200, tokenize(policy, body))
            if path == "/detokenize":
                return self._send(200, detokenize(policy, body))
            if path == "/v1/chat/completions":
                raise RequestError(
                    404, "this example server serves /v1/completions only: a character-level model has no chat template",
                    kind="NotFoundError",
                )
            raise RequestError(404, "Not Found: %s" % path, kind="NotFoundError")
        except RequestError as e:
            self._send(e.status, _error_body(e))
        except Exception as e:  # a bug here must answer, not hang the gateway's call
            self._send(500, _error_body(RequestError(500, "%s: %s" % (type(e).__name__, e), kind="InternalServerError")))


class PolicyServer:
    """Serves `policy` on host:port (port 0: any free port) from a daemon thread."""

    def __init__(self, policy: Policy, host: str = "127.0.0.1", port: int = 0):
        self.httpd = ThreadingHTTPServer((host, port), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.policy = policy
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="policy-server", daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return "http://%s:%d" % (host, port)

    def start(self) -> "PolicyServer":
        self.thread.start()
        return self

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--serve", default="127.0.0.1:8800", help="host:port (port 0: any free port)")
    p.add_argument("--model-name", default="rlgate-tiny")
    p.add_argument("--seed", type=int, default=0, help="initial weights and sampling without a request seed")
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--max-len", type=int, default=64)
    p.add_argument("--alphabet", default=DEFAULT_ALPHABET)
    p.add_argument("--threads", type=int, default=1, help="torch threads (1: the same numbers on every run)")
    p.add_argument("--exit-with-stdin", action="store_true", help="exit when stdin closes (a child of the trainer)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    tokenizer = CharTokenizer(args.alphabet)
    model = build_model(tokenizer.vocab_size, args.seed, dim=args.dim, layers=args.layers, heads=args.heads, max_len=args.max_len)
    host, _, port = args.serve.rpartition(":")
    server = PolicyServer(Policy(model, tokenizer, name=args.model_name, seed=args.seed), host or "127.0.0.1", int(port))
    print(json.dumps({"event": "listening", "url": server.url}), flush=True)
    if args.exit_with_stdin:  # the trainer's end closes the pipe, however it ended (a SIGKILL too)
        threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), name="parent-watch", daemon=True).start()
    try:
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()


if __name__ == "__main__":
    sys.exit(main())
