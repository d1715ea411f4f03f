"""The model transcripts of tests/data/computer-use/ driven to a score through `envmgr serve`: Anthropic's
tool calls over raw HTTP (POST /v1/envs/{id}/step with {"action": {"anthropic": ..., "display": ...}}),
OpenAI's and UI-TARS's through the Python client (EnvmgrEnv(action_space=...)). Each episode must score
1.0, and each answer must be the tool's own shape: Anthropic's tool_result echoing the tool_use id with
the screen as a PNG image block at the declared display size; OpenAI's computer_call_output echoing the
call_id with a PNG data URL. A refused call answers a tool_result with is_error and changes nothing.

    computer_use_api_check.py URL TOKEN FIXTURES_DIR CLIENT_DIR

Prints "ok   NAME" / "FAIL NAME: why" lines for lib.sh's tally.
"""
import base64
import json
import os
import struct
import sys
import urllib.error
import urllib.request

URL, TOKEN, FIXTURES, CLIENT = sys.argv[1:5]
sys.path.insert(0, CLIENT)
from envmgr_client import EnvmgrEnv, EnvmgrError  # noqa: E402

TASK = "demo/terminal-mkdir-tree.json"


def report(name, ok, why=""):
    print(("ok   %s" % name) if ok else ("FAIL %s: %s" % (name, why)), flush=True)


def fixture(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as f:
        return json.load(f)


def api(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(URL + path, data=data, method=method,
                                 headers={"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def png_size(b64):
    png = base64.b64decode(b64)
    if png[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    return struct.unpack(">II", png[16:24])


def anthropic_over_http():
    t = fixture("anthropic-terminal-mkdir-tree.json")
    status, env = api("POST", "/v1/envs", {"task": TASK})
    if status != 201:
        return report("anthropic: create an env", False, env)
    eid = env["id"]
    try:
        status, r = api("POST", "/v1/envs/%s/reset" % eid, {})
        report("anthropic: reset to the task", status == 200, r)
        # a refused call first: the tool's error shape, nothing executed, no step counted
        bad = {"type": "tool_use", "id": "toolu_bad", "name": "computer",
               "input": {"action": "left_click", "coordinate": [1024, 10]}}
        status, r = api("POST", "/v1/envs/%s/step" % eid, {"action": {"anthropic": bad, "display": t["display"]}})
        a = r.get("answer") or {}
        report("anthropic: an off-display click is a 400 with a tool_result is_error echoing the id",
               status == 400 and r.get("field") == "action.input.coordinate" and a.get("is_error") is True
               and a.get("tool_use_id") == "toolu_bad", r)
        answers = []
        for call in t["calls"]:
            body = call if "action_type" in call else {"anthropic": call, "display": t["display"]}
            status, r = api("POST", "/v1/envs/%s/step" % eid, {"action": body})
            if status != 200:
                return report("anthropic: step %s" % json.dumps(call)[:80], False, r)
            answers.append((call, r.get("answer")))
        ok = True
        for call, a in answers:
            if "action_type" in call:
                ok = ok and a is None
                continue
            block = (a or {}).get("content", [{}])[0]
            ok = ok and a.get("type") == "tool_result" and a.get("tool_use_id") == call["id"] \
                and block.get("type") == "image" and block["source"]["media_type"] == "image/png" \
                and png_size(block["source"]["data"]) == (1024, 640)
        report("anthropic: every tool_use answered by a tool_result with its id and a 1024x640 PNG", ok,
               json.dumps([a for _, a in answers])[:300])
        status, r = api("POST", "/v1/envs/%s/evaluate" % eid)
        report("anthropic: the transcript scores 1.0 over HTTP", status == 200 and r.get("score") == 1.0, r)
    finally:
        api("DELETE", "/v1/envs/" + eid)


def through_client(space, name, check_answer):
    t = fixture(name)
    kw = {"display": tuple(t["display"])} if "display" in t else {}
    with EnvmgrEnv(URL, TOKEN, task_config=TASK, action_space=space, **kw) as env:
        env.reset()
        try:
            env.step({"type": "teleport"} if space == "openai" else "teleport(start_box='(1,1)')")
            report("%s (client): a bad call raises EnvmgrError" % space, False, "no error")
        except EnvmgrError as e:
            report("%s (client): a bad call raises EnvmgrError naming the field (%s)" % (space, e.field),
                   e.status == 400 and e.field is not None and e.field.startswith("action"), str(e))
        answers_ok, last_info = True, {}
        for call in t["calls"]:
            obs, reward, done, info = env.step(call)
            last_info = info
            if not ("action_type" in call if isinstance(call, dict) else False):
                answers_ok = answers_ok and check_answer(call, info.get("answer"))
        report("%s (client): each call's answer is the tool's own" % space, answers_ok, json.dumps(last_info)[:300])
        score = env.evaluate()
        report("%s (client): the transcript scores 1.0" % space, score == 1.0, env.last_evaluation)


def openai_answer(call, a):
    if not a or a.get("type") != "computer_call_output" or a.get("call_id") != call["call_id"]:
        return False
    url = a["output"]["image_url"]
    return url.startswith("data:image/png;base64,") and png_size(url.split(",", 1)[1]) == (1280, 800)


anthropic_over_http()
through_client("openai", "openai-terminal-mkdir-tree.json", openai_answer)
through_client("uitars", "uitars-terminal-mkdir-tree.json", lambda call, a: a is None)
