"""rlgate_client.verl_agent_loop against a running gateway (test/e2e/verl-agent-loop.test.ts starts one, with the sim
playing SCRIPT there: a run_shell_command call `echo rlgate-e2e > proof.txt`, the same call again, then an answer).

Env: RLGATE_TEST_GATEWAY_URL (without it every test that needs the gateway skips), RLGATE_TEST_QWEN_CLI (the Qwen Code
CLI's cli.js; its test skips without it), RLGATE_TEST_NODE (node for it).

verl itself is not installable here: RlgateHarnessAgentLoop is run against a stand-in for
verl/experimental/agent_loop/agent_loop.py (volcengine/verl b178a3cd, AgentLoopBase.__init__ at line 196, run at 313,
register at 334, AgentLoopOutput at 133) written below with only what the class uses.
"""
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT = os.path.dirname(HERE)
ROOT = os.path.dirname(os.path.dirname(CLIENT))
sys.path.insert(0, CLIENT)

from rlgate_client import verl_agent_loop  # noqa: E402
from rlgate_client.verl_agent_loop import main_trajectory, prompt_text, run_harness  # noqa: E402

GATEWAY = os.environ.get("RLGATE_TEST_GATEWAY_URL")
QWEN_CLI = os.environ.get("RLGATE_TEST_QWEN_CLI")
NODE = os.environ.get("RLGATE_TEST_NODE", "node")
TOY = os.path.join(ROOT, "examples", "verl", "toy_harness.py")
PY = sys.executable
MODEL = "Qwen/Qwen3-8B"
PROMPT = "Use the shell to write the word rlgate-e2e into proof.txt."
needs_gateway = unittest.skipUnless(GATEWAY, "RLGATE_TEST_GATEWAY_URL is not set (test/e2e/verl-agent-loop.test.ts sets it)")


def get(path):
    with urllib.request.urlopen(GATEWAY + path, timeout=120) as res:
        return json.loads(res.read())


def proof_grade(run):
    """1.0 when the harness's shell tool really wrote proof.txt in its working directory."""
    try:
        with open(os.path.join(run.cwd, "proof.txt")) as f:
            return 1.0 if f.read() == "rlgate-e2e\n" else 0.0
    except FileNotFoundError:
        return 0.0


class CapturedRun(unittest.TestCase):
    def assert_output_is_the_gateways(self, result, expected_calls=None):
        """prompt_ids + response_ids are the gateway's trajectory tokens, response_mask exactly its trained tokens,
        the logprobs its logprobs; the trained tokens are the calls' sampled ids, in call order."""
        out = result.output
        self.assertIsNotNone(out, result)
        trajectories = get("/api/rollouts/%s/trajectories" % result.rollout_id)["trajectories"]
        main = main_trajectory(trajectories)
        self.assertEqual(main["trajectory_id"], result.main["trajectory_id"])
        ids, mask, lps = main["token_ids"], main["loss_mask"], main["logprobs"]
        p = len(out["prompt_ids"])
        self.assertEqual(out["prompt_ids"] + out["response_ids"], ids)
        self.assertEqual(mask[:p], [0] * p, "no trained token in the prompt")
        self.assertEqual(mask[p], 1, "the response starts at the first trained token")
        self.assertEqual(out["response_mask"], mask[p:])
        self.assertEqual(sum(out["response_mask"]), sum(mask))
        self.assertEqual(len(out["response_logprobs"]), len(out["response_ids"]))
        for got, want, m in zip(out["response_logprobs"], lps[p:], mask[p:]):
            self.assertEqual(got, 0.0 if want is None else want)
            if m:
                self.assertLessEqual(got, 0.0)
        self.assertEqual(out["reward_score"], result.reward)
        calls = get("/api/rollouts/%s/calls" % result.rollout_id)["calls"]
        if expected_calls is not None:
            self.assertEqual(len(calls), expected_calls)
        sampled = [t for c in sorted(calls, key=lambda c: c["seq"]) for t in c["choices"][0]["token_ids"]]
        sampled_lps = [lp for c in sorted(calls, key=lambda c: c["seq"]) for lp in c["choices"][0]["logprobs"]]
        trained = [t for t, m in zip(out["response_ids"], out["response_mask"]) if m]
        trained_lps = [lp for lp, m in zip(out["response_logprobs"], out["response_mask"]) if m]
        self.assertEqual(trained, sampled, "the trained tokens are exactly the calls' sampled token ids")
        for got, want in zip(trained_lps, sampled_lps):
            self.assertAlmostEqual(got, want, delta=1e-5 * max(1.0, abs(want)))  # float32 in the trajectory
        self.assertEqual(result.other_trained_tokens, 0)
        return calls


@needs_gateway
class RunHarness(CapturedRun):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="rlgate-verl-test-")
        self.cwd = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_toy_harness_through_the_gateway(self):
        result = run_harness(
            GATEWAY, [PY, TOY, "{prompt}"], PROMPT, group="verl-toy", round=3, task="proof", harness="toy",
            timeout_s=300, grade=proof_grade, model=MODEL, cwd=self.cwd,
        )
        self.assertEqual((result.status, result.reward, result.exit_code, result.timed_out), ("ok", 1.0, 0, False), result)
        self.assertTrue(os.path.exists(os.path.join(self.cwd, "proof.txt")), result.stderr)
        rollout = get("/api/rollouts/%s" % result.rollout_id)
        self.assertEqual((rollout["status"], rollout["reward"], rollout["group"], rollout["round"]), ("ok", 1.0, "verl-toy", 3))
        self.assertEqual(rollout["metadata"]["exit_code"], 0)
        calls = self.assert_output_is_the_gateways(result, expected_calls=3)  # tool call, tool call, answer
        first = calls[0]["request_received"]
        self.assertEqual(first["messages"][1], {"role": "user", "content": PROMPT})
        self.assertEqual(first["model"], MODEL)
        self.assertTrue(any(m["role"] == "tool" for m in calls[1]["request_received"]["messages"]))
        self.assertEqual(result.output["num_turns"], 7)  # 3 assistant turns
        self.assertEqual(len(result.trajectories), 1)

    def test_prompt_on_stdin_and_a_shell_command(self):
        tricky = "it's \"quoted\" $HOME `x` and; more"
        for command in ("%s %s" % (PY, TOY), "%s %s {prompt}" % (PY, TOY)):
            result = run_harness(GATEWAY, command, tricky, group="verl-stdin", timeout_s=300, model=MODEL, cwd=self.cwd)
            self.assertEqual(result.status, "ok", result)
            calls = get("/api/rollouts/%s/calls" % result.rollout_id)["calls"]
            user = calls[0]["request_received"]["messages"][1]
            self.assertEqual(user["content"], tricky, command)

    def test_harness_exiting_non_zero(self):
        script = textwrap.dedent(
            """
            import json, os, sys, urllib.request
            req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions",
                data=json.dumps({"model": os.environ["OPENAI_MODEL"], "messages": [{"role": "user", "content": sys.argv[1]}]}).encode(),
                headers={"content-type": "application/json", "authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
            urllib.request.urlopen(req).read()
            print("giving up", file=sys.stderr)
            sys.exit(3)
            """
        )
        result = run_harness(GATEWAY, [PY, "-c", script, "{prompt}"], "fail please", group="verl-fail", timeout_s=300, model=MODEL)
        self.assertEqual((result.status, result.reward, result.exit_code, result.timed_out), ("ok", 0.0, 3, False), result)
        self.assertIn("giving up", result.stderr)
        self.assertEqual(get("/api/rollouts/%s" % result.rollout_id)["reward"], 0.0)
        self.assert_output_is_the_gateways(result, expected_calls=1)
        self.assertEqual(result.output["reward_score"], 0.0)

    def test_timeout_kills_the_harness_and_its_children(self):
        pidfile = os.path.join(self.cwd, "child.pid")
        command = "sleep 300 & echo $! > %s; echo started; wait" % pidfile
        result = run_harness(GATEWAY, command, "never answered", group="verl-timeout", timeout_s=2, model=MODEL)
        self.assertEqual((result.status, result.reward, result.timed_out), ("timeout", None, True), result)
        self.assertIsNone(result.output)
        self.assertIsNone(result.main)
        self.assertEqual(result.trajectories, [])
        self.assertIn("started", result.stdout)
        rollout = get("/api/rollouts/%s" % result.rollout_id)
        self.assertEqual((rollout["status"], rollout["reward"]), ("timeout", None))
        self.assertTrue(rollout["metadata"]["timed_out"])
        with open(pidfile) as f:
            pid = int(f.read())
        for _ in range(600):  # the orphan is reaped by init: wait for that, however long the machine takes
            if not _alive(pid):
                break
            time.sleep(0.1)
        self.assertFalse(_alive(pid), "the harness's background child was killed with it")

    def test_grade_callbacks(self):
        quick = [PY, "-c", "import sys; sys.exit(0)"]
        result = run_harness(GATEWAY, quick, "x", group="verl-grade", timeout_s=60, grade=lambda run: 0.25)
        self.assertEqual((result.status, result.reward), ("ok", 0.25))
        # A harness that made no call leaves nothing to train: no output, whatever the reward.
        self.assertIsNone(result.output)

        def broken(run):
            raise KeyError("no tests")

        result = run_harness(GATEWAY, quick, "x", group="verl-grade", timeout_s=60, grade=broken)
        self.assertEqual((result.status, result.reward), ("infra_error", None))
        self.assertIn("KeyError", result.error)
        self.assertEqual(get("/api/rollouts/%s" % result.rollout_id)["status"], "infra_error")
        result = run_harness(GATEWAY, quick, "x", group="verl-grade", timeout_s=60, grade=lambda run: None)
        self.assertEqual((result.status, result.reward), ("aborted", None))

    def test_a_harness_that_does_not_start(self):
        result = run_harness(GATEWAY, ["/nonexistent/harness", "{prompt}"], "x", group="verl-missing", timeout_s=60)
        self.assertEqual((result.status, result.exit_code), ("infra_error", None))
        self.assertIn("did not start", result.error)
        self.assertEqual(get("/api/rollouts/%s" % result.rollout_id)["status"], "infra_error")


@needs_gateway
@unittest.skipUnless(QWEN_CLI, "RLGATE_TEST_QWEN_CLI is not set (the Qwen Code CLI, a devDependency)")
class QwenCode(CapturedRun):
    def test_qwen_code_through_run_harness(self):
        with tempfile.TemporaryDirectory(prefix="rlgate-verl-qwen-") as tmp:
            workspace, home = os.path.join(tmp, "workspace"), os.path.join(tmp, "home")
            os.makedirs(workspace)
            os.makedirs(os.path.join(home, ".qwen"))
            # As test/e2e/qwen-code.test.ts runs it, offline (QWEN_CODE_NOTES.md).
            settings = {
                "general": {"enableAutoUpdate": False},
                "privacy": {"usageStatisticsEnabled": False},
                "telemetry": {"enabled": False},
                "ide": {"enabled": False},
                "memory": {"enableManagedAutoMemory": False, "enableManagedAutoDream": False, "enableAutoSkill": False},
                "model": {"skipNextSpeakerCheck": True, "skipLoopDetection": True},
                "security": {"folderTrust": {"enabled": False}, "auth": {"selectedType": "openai"}},
            }
            with open(os.path.join(home, ".qwen", "settings.json"), "w") as f:
                json.dump(settings, f)
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "HOME": home,
                "TMPDIR": tmp,
                "TERM": "dumb",
                "NO_COLOR": "1",
                "QWEN_CODE_SYSTEM_SETTINGS_PATH": os.path.join(tmp, "no-system-settings.json"),
                "QWEN_CODE_SYSTEM_DEFAULTS_PATH": os.path.join(tmp, "no-system-defaults.json"),
                "QWEN_CODE_DISABLE_PRECONNECT": "1",
                "QWEN_DISABLE_AUTO_TITLE": "1",
            }
            command = [NODE, QWEN_CLI, "-p", "{prompt}", "--yolo", "--auth-type", "openai", "-o", "json"]
            result = run_harness(
                GATEWAY, command, PROMPT, group="verl-qwen", harness="qwen-code", env=env, inherit_env=False,
                timeout_s=300, grade=proof_grade, model=MODEL, cwd=workspace,
            )
            self.assertEqual((result.status, result.reward, result.exit_code), ("ok", 1.0, 0), (result.stdout[-2000:], result.stderr[-2000:]))
            calls = self.assert_output_is_the_gateways(result)
            self.assertGreaterEqual(len(calls), 2)
            stats = json.loads(result.stdout)[-1]["stats"]["models"]
            self.assertEqual(len(calls), sum(m["api"]["totalRequests"] for m in stats.values()))


class Pure(unittest.TestCase):
    def test_main_trajectory_selection(self):
        def row(tid, segment, mask, trained=True):
            return {"trajectory_id": tid, "segment": segment, "trained": trained, "loss_mask": mask}

        rows = [
            row("a", "main", [0, 1, 1, 1]),
            row("s", "sub_agent", [0, 1, 1, 1, 1, 1], trained=False),
            row("b", "main", [0, 0, 1]),
            row("c", "main", [0, 0, 0]),
        ]
        self.assertEqual(main_trajectory(rows)["trajectory_id"], "b")
        self.assertEqual(main_trajectory(rows, "most_trained")["trajectory_id"], "a")
        self.assertIsNone(main_trajectory([rows[1], rows[3]]))
        with self.assertRaises(ValueError):
            main_trajectory(rows, "first")

    def test_trajectory_output(self):
        import base64

        import numpy as np

        routing = np.arange(5 * 2 * 3, dtype="<u2").reshape(5, 2, 3)
        t = {
            "trajectory_id": "r:1:0", "token_ids": [10, 11, 12, 13, 14], "loss_mask": [0, 0, 1, 0, 1],
            "logprobs": [0, 0, -0.5, None, -0.25], "spans": [{}, {}],
            "routed_experts": {"layers": 2, "top_k": 3, "dtype": "uint16", "missing": 0,
                               "data": base64.b64encode(routing.tobytes()).decode()},
        }
        out = verl_agent_loop.trajectory_output(t, 0.5)
        self.assertEqual((out["prompt_ids"], out["response_ids"], out["response_mask"]), ([10, 11], [12, 13, 14], [1, 0, 1]))
        self.assertEqual(out["response_logprobs"], [-0.5, 0.0, -0.25])  # a context token's null is 0
        self.assertEqual((out["reward_score"], out["num_turns"]), (0.5, 5))
        np.testing.assert_array_equal(out["routed_experts"], routing)  # over all tokens, as verl places it
        t["logprobs"][4] = None
        with self.assertRaises(verl_agent_loop.RlgateError):  # a trained token without its logprob
            verl_agent_loop.trajectory_output(t, 0.5)

    def test_prompt_text(self):
        self.assertEqual(prompt_text("hi"), "hi")
        messages = [
            {"role": "system", "content": "s"},
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]},
        ]
        self.assertEqual(prompt_text(messages), "ab")
        with self.assertRaises(ValueError):
            prompt_text([{"role": "system", "content": "s"}])

    def test_no_verl_no_agent_loop_class(self):
        try:
            import verl  # noqa: F401
        except ImportError:
            self.assertFalse(hasattr(verl_agent_loop, "RlgateHarnessAgentLoop"))
        else:
            self.assertTrue(hasattr(verl_agent_loop, "RlgateHarnessAgentLoop"))


# A stand-in for verl's agent_loop module: what RlgateHarnessAgentLoop uses, with verl's signatures.
FAKE_VERL = '''
import asyncio
_agent_loop_registry = {}

def register(agent_name):
    def decorator(subclass):
        _agent_loop_registry[agent_name] = {"_target_": f"{subclass.__module__}.{subclass.__qualname__}"}
        return subclass
    return decorator

class AgentLoopMetrics:
    def __init__(self, generate_sequences=0.0, tool_calls=0.0, num_preempted=-1):
        self.generate_sequences, self.tool_calls, self.num_preempted = generate_sequences, tool_calls, num_preempted

class AgentLoopOutput:
    FIELDS = ("prompt_ids", "response_ids", "response_mask", "response_logprobs", "routed_experts", "multi_modal_data",
              "reward_score", "num_turns", "metrics", "extra_fields")
    def __init__(self, *, prompt_ids, response_ids, response_mask, metrics, response_logprobs=None, routed_experts=None,
                 multi_modal_data=None, reward_score=None, num_turns=0, extra_fields=None):
        for k in self.FIELDS:
            setattr(self, k, locals()[k])
        self.extra_fields = extra_fields or {}

class DictConfigWrap:
    def __init__(self, config):
        self.config = config

class AgentLoopBase:
    def __init__(self, trainer_config, server_manager, tokenizer, processor, dataset_cls, dataset_config, **kwargs):
        self.config = trainer_config.config
        self.server_manager = server_manager
        self.tokenizer = tokenizer
        self.processor = processor
        self.dataset_cls = dataset_cls
        self.dataset_config = dataset_config.config
        self.loop = asyncio.get_event_loop()

    async def apply_chat_template(self, messages, tools=None, images=None, videos=None, remove_system_prompt=False):
        return self.tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=True)
'''

DRIVER = '''
import asyncio, json, os, sys
from types import SimpleNamespace as NS
from verl.experimental.agent_loop import agent_loop as verl_loop
from rlgate_client.verl_agent_loop import RlgateHarnessAgentLoop
gateway, toy, py, cwd = sys.argv[1:5]
assert verl_loop._agent_loop_registry["rlgate_harness"]["_target_"] == "rlgate_client.verl_agent_loop.RlgateHarnessAgentLoop"
config = NS(actor_rollout_ref=NS(rollout=NS(prompt_length=4096, response_length=8192), model=NS(path="Qwen/Qwen3-8B")))
class Tok:
    eos_token_id = 151645
    def apply_chat_template(self, messages, **kw):
        return [1, 2, 3]
def loop(**kw):
    return RlgateHarnessAgentLoop(verl_loop.DictConfigWrap(config), NS(server_handles=[]), Tok(), None, None,
                                  verl_loop.DictConfigWrap({}), name="rlgate_harness", gateway_url=gateway, **kw)
def grade(run, **sample):
    # Each run has a workspace of its own (workspace=True by default): its proof is its own.
    assert run.cwd.startswith(cwd) and os.path.basename(run.cwd).startswith("rlgate-workspace-"), run.cwd
    with open(os.path.join(run.cwd, "proof.txt")) as f:
        written = f.read() == "rlgate-e2e\\n"
    return 1.0 if sample["extra_info"]["want"] == "ok" and written and run.exit_code == 0 else 0.0
sys.modules["graders"] = NS(grade=grade)
def show(out):
    return {k: getattr(out, k) for k in ("prompt_ids", "response_ids", "response_mask", "response_logprobs",
                                        "reward_score", "num_turns", "extra_fields")}
async def main():
    raw = [{"role": "user", "content": "Use the shell to write the word rlgate-e2e into proof.txt."}]
    ok = loop(command=[py, toy, "{prompt}"], model="Qwen/Qwen3-8B", cwd=cwd, grade="graders:grade", timeout_s=300)
    sample = dict(raw_prompt=raw, uid="prompt-uid-1", index=7, extra_info={"want": "ok"}, agent_name="rlgate_harness")
    a, b = await asyncio.gather(ok.run({"temperature": 1.0}, **sample), ok.run({"temperature": 1.0}, **sample))
    slow = loop(command="sleep 300", timeout_s=1, failure_reward=-1.0)
    c = await slow.run({}, raw_prompt=raw, uid="prompt-uid-2")
    assert os.listdir(cwd) == [], os.listdir(cwd)  # the workspaces are gone
    print(json.dumps([show(a), show(b), show(c)]))
asyncio.run(main())
'''


@needs_gateway
class AgentLoopClass(CapturedRun):
    def test_agent_loop_with_a_verl_stand_in(self):
        with tempfile.TemporaryDirectory(prefix="rlgate-fake-verl-") as tmp:
            pkg = os.path.join(tmp, "verl", "experimental", "agent_loop")
            os.makedirs(pkg)
            for d in (os.path.join(tmp, "verl"), os.path.join(tmp, "verl", "experimental"), pkg):
                open(os.path.join(d, "__init__.py"), "w").close()
            with open(os.path.join(pkg, "agent_loop.py"), "w") as f:
                f.write(FAKE_VERL)
            cwd = os.path.join(tmp, "work")
            os.makedirs(cwd)
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([tmp, CLIENT]))
            done = subprocess.run(
                [PY, "-c", DRIVER, GATEWAY, TOY, PY, cwd], env=env, capture_output=True, text=True, timeout=900
            )
            self.assertEqual(done.returncode, 0, done.stderr)
            a, b, c = json.loads(done.stdout.strip().splitlines()[-1])
        for out in (a, b):
            rid = out["extra_fields"]["rlgate_rollout_id"]
            self.assertEqual(out["extra_fields"]["rlgate_status"], "ok")
            self.assertEqual(out["reward_score"], 1.0)
            rollout = get("/api/rollouts/%s" % rid)
            self.assertEqual((rollout["group"], rollout["task"], rollout["status"]), ("prompt-uid-1", "7", "ok"))
            main = main_trajectory(get("/api/rollouts/%s/trajectories" % rid)["trajectories"])
            self.assertEqual(out["prompt_ids"] + out["response_ids"], main["token_ids"])
            self.assertEqual(out["response_mask"], main["loss_mask"][len(out["prompt_ids"]):])
        self.assertNotEqual(a["extra_fields"]["rlgate_rollout_id"], b["extra_fields"]["rlgate_rollout_id"])
        # The timed-out sample: verl still gets one, with nothing to train and the failure reward.
        self.assertEqual(c["extra_fields"]["rlgate_status"], "timeout")
        self.assertEqual((c["prompt_ids"], c["response_ids"], c["response_mask"]), ([1, 2, 3], [151645], [0]))
        self.assertEqual(c["reward_score"], -1.0)


def _alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


if __name__ == "__main__":
    unittest.main()
