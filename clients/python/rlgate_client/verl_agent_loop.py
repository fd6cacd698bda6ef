"""Run an unmodified agent harness through rlgate, and hand verl's agent loop what it captured.

`run_harness` (stdlib + rlgate_client.adapters; no verl) does one rollout end to end:

1. creates a rollout on the gateway (POST /api/rollouts, with `deadline_s` = timeout_s + 60 so that the gateway
   finishes it even if this process dies),
2. runs the harness command as a subprocess, in a process group of its own, with the rollout's base URLs in its
   environment (OPENAI_BASE_URL, ANTHROPIC_BASE_URL, the rollout key as OPENAI_API_KEY / ANTHROPIC_API_KEY, and
   RLGATE_BASE_URL, RLGATE_ANTHROPIC_BASE_URL, RLGATE_ROLLOUT_ID, RLGATE_MODEL, RLGATE_PROMPT as `rlgate run` gives them),
3. kills the whole group at `timeout_s` (the rollout is then finished as `timeout`, without a reward),
4. grades it: `grade(run)` -> reward (default: exit code 0 -> 1.0, anything else -> 0.0),
5. finishes the rollout with that reward (POST /api/rollouts/{id}/finish),
6. reads its trajectories (GET /api/rollouts/{id}/trajectories) and returns the main agent's trajectory as the fields
   of verl's AgentLoopOutput (adapters.verl.agent_loop_output), with the rollout id and every trajectory.

The prompt reaches the harness in one of two ways:
- `{prompt}` in the command: a list command (argv, no shell) gets it substituted as is, inside any argument; a string
  command runs under /bin/sh with `{prompt}` replaced by the shell-quoted prompt (as `rlgate run --harness` templates).
  `{base_url}`, `{anthropic_base_url}`, `{model}` and `{rollout}` are replaced the same way. The harness's stdin is
  /dev/null.
- no `{prompt}` in the command: the prompt is written to the harness's stdin, which is then closed.

`RlgateHarnessAgentLoop` (registered as "rlgate_harness") is defined only when verl imports: a verl agent loop
(verl/experimental/agent_loop/agent_loop.py, AgentLoopBase.run) that runs run_harness in a thread pool. See
docs/trainers.md, "Running a harness from verl's agent loop", and examples/verl/.
"""
import asyncio
import base64
import json
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from .adapters.verl import agent_loop_output

__all__ = ["HarnessRun", "HarnessResult", "RlgateError", "run_harness", "main_trajectory", "prompt_text"]

# Seconds past the harness's time limit after which the gateway itself finishes the rollout as `timeout` (the rollout's
# deadline_s): a rollout this process could not finish (it was killed) does not stay open.
DEADLINE_GRACE_S = 60.0
# How much of the harness's stdout / stderr a result keeps (the tail).
OUTPUT_TAIL_CHARS = 64 * 1024


class RlgateError(RuntimeError):
    """The gateway answered an error (status and body in the message)."""

    def __init__(self, message: str, status: Optional[int] = None):
        super().__init__(message)
        self.status = status


@dataclass
class HarnessRun:
    """What a grade callback sees: the harness has ended (not timed out), its rollout still open."""

    rollout_id: str
    exit_code: int
    stdout: str
    stderr: str
    duration_s: float
    cwd: Optional[str]
    gateway_url: str
    prompt: str


@dataclass
class HarnessResult:
    """One rollout: how the harness ended, how the rollout was finished, and what verl gets.

    status: the rollout's finish status: "ok" (graded), "timeout" (killed at timeout_s, or the gateway's deadline came
    first), "infra_error" (the harness could not start, or grade raised) or "aborted" (grade returned None).
    output: the main agent's trajectory as AgentLoopOutput fields (prompt_ids, response_ids, response_mask,
    response_logprobs, routed_experts, reward_score, num_turns), or None when there is nothing to train: the status is
    not "ok", or no trained main-agent trajectory exists (see `main_trajectory`).
    trajectories: every trajectory of the rollout, as the gateway's JSON (snake_case: token_ids, loss_mask, logprobs,
    segment, trained, spans, ...). main: the one `output` was made from.
    other_trained_tokens: trained tokens of the rollout that `output` does not hold (other trained trajectories:
    a harness that re-serialized its history, or trained sub-agents). verl's agent loop has one sample per run, so
    these are not trained through it; the RL core's batches train every row.
    """

    rollout_id: str
    status: str
    reward: Optional[float]
    exit_code: Optional[int]
    timed_out: bool
    duration_s: float
    stdout: str
    stderr: str
    trajectories: List[Dict[str, Any]] = field(default_factory=list)
    main: Optional[Dict[str, Any]] = None
    output: Optional[Dict[str, Any]] = None
    other_trained_tokens: int = 0
    error: Optional[str] = None
    rollout: Dict[str, Any] = field(default_factory=dict)


def _request(method: str, url: str, body: Any = None, token: Optional[str] = None, timeout: float = 120.0) -> Any:
    data = None if body is None else json.dumps(body).encode("utf-8")
    headers = {"accept": "application/json"}
    if data is not None:
        headers["content-type"] = "application/json"
    if token:
        headers["authorization"] = "Bearer " + token
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as res:
            return json.loads(res.read().decode("utf-8"))
    except urllib.error.HTTPError as e:
        text = e.read().decode("utf-8", "replace")[:2000]
        raise RlgateError("%s %s: HTTP %d %s" % (method, url, e.code, text), e.code) from None


def _substitute(text: str, values: Mapping[str, str], quote: Callable[[str], str]) -> str:
    for name, value in values.items():
        text = text.replace("{" + name + "}", quote(value))
    return text


def _tail(path: str) -> str:
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - OUTPUT_TAIL_CHARS))
        return f.read().decode("utf-8", "replace")


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the harness's process group (harnesses relaunch themselves and spawn tools: the pid alone is not enough)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def main_trajectory(trajectories: Sequence[Mapping[str, Any]], select: str = "last") -> Optional[Mapping[str, Any]]:
    """The trajectory verl gets: among the trained trajectories of segment "main" that hold a trained token, the last
    one in the gateway's order (leaf call order: it holds the harness's final turns) with select="last", or the one with
    the most trained tokens with select="most_trained". None when there is none."""
    rows = [
        t
        for t in trajectories
        if t.get("segment") == "main" and t.get("trained", True) and any(int(m) for m in t.get("loss_mask", []))
    ]
    if not rows:
        return None
    if select == "last":
        return rows[-1]
    if select == "most_trained":
        return max(reversed(rows), key=lambda t: sum(int(m) for m in t["loss_mask"]))
    raise ValueError("select: expected 'last' or 'most_trained', got %r" % (select,))


def _routed_experts(trajectory: Mapping[str, Any]):
    """The trajectory's routed experts (MoE routing replay) as a NumPy [tokens, layers, top_k] array, or None."""
    routing = trajectory.get("routed_experts")
    if not routing:
        return None
    import numpy as np

    dtype = {"uint8": np.uint8, "uint16": np.dtype("<u2")}[routing["dtype"]]
    data = np.frombuffer(base64.b64decode(routing["data"]), dtype=dtype)
    return data.reshape(len(trajectory["token_ids"]), int(routing["layers"]), int(routing["top_k"]))


def trajectory_output(trajectory: Mapping[str, Any], reward: Optional[float]) -> Dict[str, Any]:
    """A trajectory of GET /api/rollouts/{id}/trajectories as AgentLoopOutput fields. num_turns: the sampled spans on
    its path (assistant turns) times two (each answers a user or tool turn) plus one, as verl's ToolAgentLoop counts
    user + assistant turns + 1 — an approximation: verl uses it for metrics only."""
    logprobs = trajectory.get("logprobs")
    mask = trajectory["loss_mask"]
    if logprobs is not None and any(lp is None for lp, m in zip(logprobs, mask) if int(m)):
        raise RlgateError(
            "trajectory %s: the upstream sent no logprob for some trained tokens" % trajectory.get("trajectory_id")
        )
    if logprobs is not None:
        logprobs = [0.0 if lp is None else lp for lp in logprobs]
    turns = len(trajectory.get("spans") or [])
    return agent_loop_output(
        trajectory["token_ids"],
        mask,
        logprobs,
        reward=reward,
        num_turns=2 * turns + 1 if turns else 0,
        routed_experts=_routed_experts(trajectory),
    )


def run_harness(
    gateway_url: str,
    command: Union[str, Sequence[str]],
    prompt: str,
    *,
    group: Optional[str],
    round: Optional[int] = None,
    task: Optional[str] = None,
    harness: Optional[str] = None,
    env: Optional[Mapping[str, str]] = None,
    timeout_s: float,
    grade: Optional[Callable[[HarnessRun], Optional[float]]] = None,
    control_token: Optional[str] = None,
    model: Optional[str] = None,
    cwd: Optional[str] = None,
    workspace: bool = False,
    inherit_env: bool = True,
    metadata: Optional[Mapping[str, Any]] = None,
    policy_version: Union[str, int, None] = None,
    select: str = "last",
) -> HarnessResult:
    """Run `command` as one rollout of `group` through the gateway at `gateway_url`; see the module's docstring.

    env: variables for the harness, set after rlgate's (they win); inherit_env: start from this process's environment
    (else from rlgate's variables and `env` alone: give PATH and HOME yourself). model: OPENAI_MODEL / RLGATE_MODEL
    and `{model}`. cwd: the harness's working directory; workspace=True: a fresh empty directory (inside cwd when
    given) for this run alone, removed once graded. grade(run) -> reward (a float; None: no reward, the rollout is finished `aborted`); not called
    after a timeout. A grade that raises finishes the rollout as `infra_error` and the result says why.
    Errors of the gateway (it is down, it refused the create) raise RlgateError; what the harness does never raises.
    """
    base = gateway_url.rstrip("/")
    meta = dict(metadata or {})
    meta.setdefault("runner", "rlgate_client.verl_agent_loop")
    body: Dict[str, Any] = {"group": group, "task": task, "harness": harness, "metadata": meta}
    body["deadline_s"] = float(timeout_s) + DEADLINE_GRACE_S
    if round is not None:
        body["round"] = int(round)
    if policy_version is not None:
        body["policy_version"] = policy_version
    rollout = _request("POST", base + "/api/rollouts", body, control_token)
    rid = rollout["id"]
    urls = rollout["base_urls"]
    values = {
        "prompt": prompt,
        "base_url": urls["openai"],
        "anthropic_base_url": urls["anthropic"],
        "model": model or "",
        "rollout": rid,
    }
    child_env = dict(os.environ) if inherit_env else {}
    child_env.update(
        {
            "OPENAI_BASE_URL": urls["openai"],
            "OPENAI_API_KEY": rollout["key"],
            "ANTHROPIC_BASE_URL": urls["anthropic"],
            "ANTHROPIC_API_KEY": rollout["key"],
            "RLGATE_BASE_URL": urls["openai"],
            "RLGATE_ANTHROPIC_BASE_URL": urls["anthropic"],
            "RLGATE_ROLLOUT_ID": rid,
            "RLGATE_PROMPT": prompt,
        }
    )
    if model:
        child_env["OPENAI_MODEL"] = model
        child_env["RLGATE_MODEL"] = model
    child_env.update({k: str(v) for k, v in (env or {}).items()})

    if isinstance(command, str):
        on_stdin = "{prompt}" not in command
        argv: Union[str, List[str]] = _substitute(command, values, shlex.quote)
        shell = True
    else:
        on_stdin = not any("{prompt}" in str(a) for a in command)
        argv = [_substitute(str(a), values, lambda v: v) for a in command]
        shell = False

    if workspace:
        cwd = tempfile.mkdtemp(prefix="rlgate-workspace-", dir=cwd)
    try:
        return _run(base, rid, argv, shell, on_stdin, prompt, child_env, cwd, timeout_s, grade, control_token, select)
    finally:
        if workspace:
            shutil.rmtree(cwd, ignore_errors=True)


def _run(base, rid, argv, shell, on_stdin, prompt, child_env, cwd, timeout_s, grade, control_token, select):
    started = time.monotonic()
    exit_code: Optional[int] = None
    timed_out = False
    error: Optional[str] = None
    with tempfile.TemporaryDirectory(prefix="rlgate-harness-") as tmp:
        out_path, err_path = os.path.join(tmp, "stdout"), os.path.join(tmp, "stderr")
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            try:
                proc = subprocess.Popen(
                    argv,
                    shell=shell,
                    cwd=cwd,
                    env=child_env,
                    stdin=subprocess.PIPE if on_stdin else subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,
                )
            except OSError as e:
                proc = None
                error = "the harness did not start: %s" % e
            if proc is not None:
                try:
                    if on_stdin:
                        try:
                            proc.stdin.write(prompt.encode("utf-8"))
                        except (BrokenPipeError, OSError):
                            pass  # the harness does not read its stdin
                        finally:
                            try:
                                proc.stdin.close()
                            except OSError:
                                pass
                    remaining = max(0.0, float(timeout_s) - (time.monotonic() - started))
                    exit_code = proc.wait(timeout=remaining)
                except subprocess.TimeoutExpired:
                    timed_out = True
                    _kill_group(proc)
                    exit_code = proc.wait()
                finally:
                    # Nothing the harness started outlives the rollout (its tools, a relaunched worker).
                    _kill_group(proc)
                    if proc.poll() is None:
                        proc.kill()
                        proc.wait()
        duration = time.monotonic() - started
        stdout, stderr = _tail(out_path), _tail(err_path)

    reward: Optional[float] = None
    if error is not None:
        status = "infra_error"
    elif timed_out:
        status = "timeout"
    else:
        run = HarnessRun(rid, int(exit_code), stdout, stderr, duration, cwd, base, prompt)
        try:
            graded = grade(run) if grade is not None else (1.0 if exit_code == 0 else 0.0)
            if graded is None:
                status = "aborted"
            else:
                reward, status = float(graded), "ok"
        except Exception as e:  # noqa: BLE001 - a grader's failure is the rollout's, reported in the result
            status, error = "infra_error", "grade raised %s: %s" % (type(e).__name__, e)

    finish_meta: Dict[str, Any] = {"exit_code": exit_code, "timed_out": timed_out, "duration_s": round_s(duration)}
    if error:
        finish_meta["error"] = error
    finish: Dict[str, Any] = {"status": status, "metadata": finish_meta}
    if reward is not None:
        finish["reward"] = reward
    try:
        finished = _request("POST", "%s/api/rollouts/%s/finish" % (base, rid), finish, control_token)
    except RlgateError as e:
        # The gateway's deadline finished it first (the harness outlived timeout_s + DEADLINE_GRACE_S): say so.
        if e.status != 400:
            raise
        finished = _request("GET", "%s/api/rollouts/%s" % (base, rid), None, control_token)
        if finished.get("status") == "open":
            raise
        status, reward = finished["status"], finished.get("reward")
        error = error or "the gateway finished the rollout first (%s)" % status

    trajectories = _request("GET", "%s/api/rollouts/%s/trajectories" % (base, rid), None, control_token)["trajectories"]
    main = main_trajectory(trajectories, select)
    output = None
    other = sum(sum(int(m) for m in t["loss_mask"]) for t in trajectories if t.get("trained", True))
    if main is not None and status == "ok":
        output = trajectory_output(main, reward)
        other -= sum(output["response_mask"])
    return HarnessResult(
        rollout_id=rid,
        status=status,
        reward=reward,
        exit_code=exit_code,
        timed_out=timed_out,
        duration_s=duration,
        stdout=stdout,
        stderr=stderr,
        trajectories=trajectories,
        main=main,
        output=output,
        other_trained_tokens=other,
        error=error,
        rollout=finished,
    )


def round_s(seconds: float) -> float:
    return float("%.3f" % seconds)


def prompt_text(raw_prompt: Any) -> str:
    """The text a harness is given, from a verl sample's `raw_prompt` (chat messages): the last user message's content
    (its text parts, when it is a list of parts). A string is returned as it is."""
    if isinstance(raw_prompt, str):
        return raw_prompt
    messages = list(raw_prompt)
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            return "".join(part.get("text", "") for part in content if part.get("type", "text") == "text")
    raise ValueError("raw_prompt holds no user message")


def _plain(value: Any) -> Any:
    """OmegaConf containers (hydra passes the agent loop's config keys as them) as plain lists and dicts."""
    try:
        from omegaconf import OmegaConf

        if OmegaConf.is_config(value):
            return OmegaConf.to_container(value, resolve=True)
    except ImportError:
        pass
    return value


def _load_callable(spec: Any) -> Optional[Callable]:
    """A callable, or "package.module:function"."""
    if spec is None or callable(spec):
        return spec
    import importlib

    module, _, name = str(spec).partition(":")
    if not name:
        raise ValueError("grade: expected 'package.module:function', got %r" % (spec,))
    return getattr(importlib.import_module(module), name)


def _define_agent_loop():
    """RlgateHarnessAgentLoop, against verl's agent loop API (verl/experimental/agent_loop/agent_loop.py: AgentLoopBase
    __init__(trainer_config, server_manager, tokenizer, processor, dataset_cls, dataset_config, **kwargs), `async def
    run(self, sampling_params, **kwargs) -> AgentLoopOutput`, `register(agent_name)`); None without verl."""
    try:
        from verl.experimental.agent_loop.agent_loop import (
            AgentLoopBase,
            AgentLoopMetrics,
            AgentLoopOutput,
            register,
        )
    except ImportError:
        return None
    import concurrent.futures
    import functools
    import logging
    import threading

    logger = logging.getLogger(__name__)
    pools: Dict[int, concurrent.futures.ThreadPoolExecutor] = {}
    pools_lock = threading.Lock()
    wired: Dict[str, bool] = {}

    @register("rlgate_harness")
    class RlgateHarnessAgentLoop(AgentLoopBase):
        """verl agent loop: each sample runs an unmodified harness (one rollout of rlgate) and returns what the gateway
        captured: exact token ids, the trained-token mask and the inference server's logprobs, and the graded reward.

        Its keys in the agent loop config (agent_loop_config_path; hydra passes them to __init__), each also read from
        the environment where named:
          command (required): the harness command, a list (argv) or a string (a shell command), with `{prompt}` etc.
          gateway_url (RLGATE_GATEWAY_URL, default http://127.0.0.1:8700), control_token (RLGATE_TOKEN),
          timeout_s (600), model (OPENAI_MODEL for the harness; default verl's served model name, the local model path),
          env (variables for the harness), cwd, workspace (true: each run in a fresh empty directory, inside cwd when
          given, removed once graded), harness (a name for the rollout),
          grade ("package.module:function", called as grade(run, **sample) with the HarnessRun and the sample's dataset
          fields; default: exit code 0 -> 1.0),
          failure_reward (0.0: reward_score of a sample whose harness timed out or failed; its response is masked out),
          select ("last" | "most_trained", see main_trajectory), max_concurrency (64 harnesses at once per worker),
          upstreams_file (write verl's inference server addresses into this file, read by `rlgate serve
          --upstreams-file`), prompt_key (take the prompt from extra_info[prompt_key] instead of raw_prompt).
        verl's sampling_params are not applied: the harness sends its own (temperature, max_tokens, ...).
        """

        # register() and hydra name the class by __module__ + __qualname__: the module-level name, not this function's.
        __qualname__ = "RlgateHarnessAgentLoop"

        def __init__(
            self,
            trainer_config,
            server_manager,
            tokenizer,
            processor=None,
            dataset_cls=None,
            dataset_config=None,
            command=None,
            gateway_url=None,
            control_token=None,
            timeout_s=600,
            model=None,
            env=None,
            cwd=None,
            workspace=True,
            harness="verl-agent-loop",
            grade=None,
            failure_reward=0.0,
            select="last",
            max_concurrency=64,
            upstreams_file=None,
            prompt_key=None,
            **kwargs,
        ):
            super().__init__(trainer_config, server_manager, tokenizer, processor, dataset_cls, dataset_config, **kwargs)
            if command is None:
                raise ValueError("rlgate_harness: the agent loop config needs `command` (the harness to run)")
            command = _plain(command)
            self.command = command if isinstance(command, str) else [str(a) for a in command]
            self.gateway_url = gateway_url or os.environ.get("RLGATE_GATEWAY_URL", "http://127.0.0.1:8700")
            self.control_token = control_token or os.environ.get("RLGATE_TOKEN") or None
            self.timeout_s = float(timeout_s)
            rollout = self.config.actor_rollout_ref.rollout
            # vLLM in verl serves the model under its local path (vllm_async_server.py: ["serve", local_path]).
            self.model = model or _served_model_name(self.config)
            self.env = {str(k): str(v) for k, v in (_plain(env) or {}).items()}
            self.cwd = cwd
            self.workspace = bool(workspace)
            self.harness = harness
            self.grade = _load_callable(grade)
            self.failure_reward = float(failure_reward)
            self.select = select
            self.prompt_key = prompt_key
            self.prompt_length = int(rollout.prompt_length)
            self.response_length = int(rollout.response_length)
            self.upstreams_file = upstreams_file
            with pools_lock:
                n = int(max_concurrency)
                if n not in pools:
                    pools[n] = concurrent.futures.ThreadPoolExecutor(n, thread_name_prefix="rlgate-harness")
                self.pool = pools[n]

        async def _wire_upstreams(self):
            """Write the inference servers' addresses into upstreams_file, once per process (the gateway follows it)."""
            if not self.upstreams_file or wired.get(self.upstreams_file):
                return
            handles = list(getattr(self.server_manager, "server_handles", []) or [])
            addresses = await asyncio.gather(*[h.get_server_address.remote() for h in handles])
            lines = []
            for host, port in addresses:
                host = "[%s]" % host if ":" in str(host) else host
                lines.append("http://%s:%s\n" % (host, port))
            tmp = "%s.%d.tmp" % (self.upstreams_file, os.getpid())
            with open(tmp, "w") as f:
                f.writelines(sorted(set(lines)))
            os.replace(tmp, self.upstreams_file)
            wired[self.upstreams_file] = True
            logger.info("rlgate_harness: wrote %d inference servers to %s", len(lines), self.upstreams_file)
            await asyncio.sleep(1.0)  # the gateway picks a change up within a fraction of a second

        async def run(self, sampling_params: Dict[str, Any], **kwargs) -> "AgentLoopOutput":
            await self._wire_upstreams()
            extra = _plain(kwargs.get("extra_info")) or {}
            if self.prompt_key:
                prompt = str(extra[self.prompt_key])
            else:
                prompt = prompt_text(kwargs["raw_prompt"])
            # verl's uid: one per prompt, shared by its rollout.n samples (ray_trainer.py, fit): the GRPO group.
            group = None if kwargs.get("uid") is None else str(kwargs["uid"])
            task = extra.get("task") or (None if kwargs.get("index") is None else str(kwargs["index"]))
            grade = None
            if self.grade is not None:
                grade = functools.partial(self.grade, **{k: v for k, v in kwargs.items() if k != "raw_prompt"})
            call = functools.partial(
                run_harness,
                self.gateway_url,
                self.command,
                prompt,
                group=group,
                task=None if task is None else str(task),
                harness=self.harness,
                env=self.env,
                timeout_s=self.timeout_s,
                grade=grade,
                control_token=self.control_token,
                model=self.model,
                cwd=self.cwd,
                workspace=self.workspace,
                select=self.select,
            )
            result: HarnessResult = await asyncio.get_running_loop().run_in_executor(self.pool, call)
            extra_fields = {
                "rlgate_rollout_id": result.rollout_id,
                "rlgate_status": result.status,
                "rlgate_other_trained_tokens": result.other_trained_tokens,
            }
            metrics = AgentLoopMetrics(generate_sequences=result.duration_s)
            out = result.output
            if out is not None and len(out["prompt_ids"]) > self.prompt_length:
                raise ValueError(
                    "rlgate_harness: rollout %s's prompt is %d tokens, over rollout.prompt_length=%d (a harness's "
                    "system prompt and tools are long: raise prompt_length)"
                    % (result.rollout_id, len(out["prompt_ids"]), self.prompt_length)
                )
            if out is None:
                if result.status == "ok":
                    logger.warning("rlgate_harness: rollout %s left no trained main-agent trajectory", result.rollout_id)
                else:
                    logger.warning(
                        "rlgate_harness: rollout %s ended %s (%s): masked out, reward_score=%s",
                        result.rollout_id,
                        result.status,
                        result.error or "exit %s" % result.exit_code,
                        self.failure_reward,
                    )
                return await self._placeholder(kwargs, extra_fields, metrics)
            n = self.response_length
            extra_fields["rlgate_truncated"] = len(out["response_ids"]) > n
            # Longer responses are cut at rollout.response_length, as verl's ToolAgentLoop cuts its own.
            return AgentLoopOutput(
                prompt_ids=out["prompt_ids"],
                response_ids=out["response_ids"][:n],
                response_mask=out["response_mask"][:n],
                response_logprobs=None if out["response_logprobs"] is None else out["response_logprobs"][:n],
                reward_score=out["reward_score"],
                num_turns=out["num_turns"],
                metrics=metrics,
                extra_fields=extra_fields,
            )

        async def _placeholder(self, kwargs, extra_fields, metrics):
            """A sample with nothing to train (response_mask all 0) for a run that left none: verl's batch needs one
            sample per run. Its prompt is the dataset's, as verl's own loops tokenize it; its reward failure_reward."""
            prompt_ids = await self.apply_chat_template(list(kwargs["raw_prompt"]))
            prompt_ids = list(prompt_ids)[-self.prompt_length :]
            eos = self.tokenizer.eos_token_id
            eos = eos[0] if isinstance(eos, (list, tuple)) else eos
            return AgentLoopOutput(
                prompt_ids=prompt_ids,
                response_ids=[int(eos if eos is not None else 0)],
                response_mask=[0],
                response_logprobs=[0.0],
                reward_score=self.failure_reward,
                num_turns=0,
                metrics=metrics,
                extra_fields=extra_fields,
            )

    return RlgateHarnessAgentLoop


def _served_model_name(config) -> Optional[str]:
    try:
        from verl.utils.fs import copy_to_local

        return copy_to_local(config.actor_rollout_ref.model.path)
    except Exception:  # noqa: BLE001 - a name is a convenience: the harness may set its own
        return None


_agent_loop = _define_agent_loop()
if _agent_loop is not None:
    RlgateHarnessAgentLoop = _agent_loop
    __all__.append("RlgateHarnessAgentLoop")
del _agent_loop
