"""A vLLM-compatible HTTP endpoint over a torch Policy: what rlgate's gateway needs from vLLM for /v1/completions.

Routes (stdlib http.server, one thread per connection; generations are serialized by the policy's lock):
  POST /v1/completions   prompt as text or token ids, n, max_tokens, temperature, seed, logprobs,
                         return_token_ids; answered as vLLM (>= 0.10.2) answers it: choice-level
                         prompt_token_ids and token_ids (when return_token_ids), logprobs in the completions
                         layout (tokens, token_logprobs, top_logprobs, text_offset) when logprobs is set.
  GET  /v1/models        the served model (max_model_len = the model's positions)
  GET  /health           200
  GET  /version          {"version": ...}
  GET  /policy           {"model", "version"}: the policy version served now (rlgate's closed-loop driver waits on it)

Not served (a clear 400/404 instead): streaming, chat completions (a character model has no chat template), top_p /
top_k / penalties other than their neutral values, echo, best_of. The stop token ends a generation and stays in the
text and the ids, so text re-encodes to the ids that were sampled.
"""
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Optional

from .torch_policy import Policy

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


def completions(policy: Policy, body: dict) -> dict:
    if not isinstance(body, dict):
        raise RequestError(400, "request body must be a JSON object")
    model = body.get("model")
    if model is not None and model != policy.name:
        raise RequestError(404, "The model `%s` does not exist." % model, kind="NotFoundError", param="model")
    if body.get("stream"):
        raise RequestError(400, "stream: this example server answers whole responses only (ask with stream false)", param="stream")
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
    want_ids = body.get("return_token_ids") is True
    prompts = _prompts(policy, body.get("prompt"))
    tok = policy.tokenizer

    choices = []
    prompt_tokens = 0
    completion_tokens = 0
    for p_index, ids in enumerate(prompts):
        prompt_tokens += len(ids)
        for c in range(n):
            index = p_index * n + c
            try:
                out, lps, tops, finish, _ = policy.sample(
                    ids, max_tokens, float(temperature), policy.generator(seed, index), top_n=logprobs or 0
                )
            except ValueError as e:
                raise RequestError(400, str(e), param="max_tokens")
            completion_tokens += len(out)
            lp_json = None
            if logprobs is not None:
                pieces = [tok.decode([i]) for i in out]
                offsets, at = [], 0
                for piece in pieces:
                    offsets.append(at)
                    at += len(piece)
                top_json = []
                for i, (t, lp) in enumerate(zip(out, lps)):
                    entry = {tok.decode([t]): lp}  # vLLM lists the sampled token beside the top ones
                    for top_id, top_lp in tops[i] if i < len(tops) else []:
                        entry.setdefault(tok.decode([top_id]), top_lp)
                    top_json.append(entry)
                lp_json = {"text_offset": offsets, "token_logprobs": lps, "tokens": pieces, "top_logprobs": top_json}
            choices.append(
                {
                    "index": index,
                    "text": tok.decode(out),
                    "logprobs": lp_json,
                    "finish_reason": finish,
                    "stop_reason": None,
                    "prompt_logprobs": None,
                    "prompt_token_ids": ids if want_ids else None,
                    "token_ids": out if want_ids else None,
                }
            )
    return {
        "id": "cmpl-%s" % uuid.uuid4().hex,
        "object": "text_completion",
        "created": int(time.time()),
        "model": policy.name,
        "choices": choices,
        "service_tier": None,
        "system_fingerprint": None,
        "usage": {
            "prompt_tokens": prompt_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens": completion_tokens,
            "prompt_tokens_details": None,
        },
        "kv_transfer_params": None,
    }


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
            return self._send(200, {"model": policy.name, "version": policy.version})
        self._send(404, {"error": {"message": "Not Found: %s" % path, "type": "NotFoundError", "param": None, "code": 404}})

    def do_POST(self):
        policy = self.server.policy
        path = self.path.split("?", 1)[0]
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            if path == "/v1/completions":
                try:
                    body = json.loads(raw or b"null")
                except ValueError as e:
                    raise RequestError(400, "request body is not JSON: %s" % e)
                return self._send(200, completions(policy, body))
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
