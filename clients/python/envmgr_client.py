"""envmgr_client: drive envmgr desktop envs over envmgr's HTTP API
(`envmgr serve`, docs/http-api.md) with the shape of OSWorld's DesktopEnv,
so an OSWorld agent loop runs with a one-line change:

    # env = DesktopEnv(action_space="pyautogui", ...)
    env = EnvmgrEnv("http://127.0.0.1:7480", token, action_space="pyautogui")
    obs = env.reset(task_config=example)          # obs["screenshot"] is PNG bytes
    obs, reward, done, info = env.step(action, pause)
    score = env.evaluate()
    env.close()

Python 3 standard library only (urllib, json). A unix-socket server is
reached with url="unix:/path/to/socket".
"""
import base64
import http.client
import json
import os
import socket
import urllib.error
import urllib.parse
import urllib.request

__all__ = ["EnvmgrEnv", "EnvmgrError", "EnvmgrNoScore", "Client"]


class EnvmgrError(Exception):
    """An API error: .status (HTTP code), .field (the request field at fault or None), .message;
    .answer: for a refused tool call of Anthropic's computer tool, the tool_result (is_error) to
    hand back to the model, else None."""

    def __init__(self, status, message, field=None, answer=None):
        super().__init__("%s (HTTP %d%s)" % (message, status, ", field %s" % field if field else ""))
        self.status, self.message, self.field, self.answer = status, message, field, answer


class EnvmgrNoScore(Exception):
    """evaluate() of an episode that has no score: it was not evaluated (.status "not_evaluated":
    the env failed, or a setup or postconfig step could not run: .exit_cause env_error or
    setup_error) or its evaluator failed (.status "evaluator_error"). Its 0 is not a score, so it
    is raised rather than returned, as OSWorld's evaluate() raises and leaves the example without a
    result. .evaluation is the whole answer (.reason why)."""

    def __init__(self, evaluation):
        self.evaluation = evaluation
        self.status = evaluation.get("status")
        self.exit_cause = evaluation.get("exit_cause")
        self.reason = evaluation.get("reason", "")
        super().__init__("no score (%s, %s): %s" % (self.status, self.exit_cause, self.reason))


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.unix_path)


class Client:
    """The API one call a method: JSON in, JSON (or bytes) out, errors as EnvmgrError."""

    def __init__(self, url, token=None, timeout=600):
        if token is None:
            token = os.environ.get("ENVMGR_TOKEN")
            if token is None and os.environ.get("ENVMGR_TOKEN_FILE"):
                with open(os.environ["ENVMGR_TOKEN_FILE"], encoding="ascii") as f:
                    token = f.read().strip()
        if not token:
            raise ValueError("envmgr: a token is needed (argument, ENVMGR_TOKEN or ENVMGR_TOKEN_FILE)")
        self.url, self.token, self.timeout = url.rstrip("/"), token, timeout

    def request(self, method, path, body=None, raw=False):
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": "Bearer " + self.token}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self.url.startswith("unix:"):
            conn = _UnixConnection(self.url[5:], self.timeout)
            try:
                conn.request(method, path, body=data, headers=headers)
                resp = conn.getresponse()
                status, payload = resp.status, resp.read()
            finally:
                conn.close()
        else:
            req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                    status, payload = resp.status, resp.read()
            except urllib.error.HTTPError as e:
                status, payload = e.code, e.read()
        if status >= 400:
            try:
                err = json.loads(payload)
                raise EnvmgrError(status, err.get("error", "error"), err.get("field"), err.get("answer"))
            except (ValueError, AttributeError):
                raise EnvmgrError(status, payload[:200].decode(errors="replace")) from None
        return payload if raw else json.loads(payload)

    def health(self):
        return self.request("GET", "/v1/health")

    def envs(self):
        return self.request("GET", "/v1/envs")["envs"]

    def states(self):
        """The saved states in the server's cache (docs/states.md)."""
        return self.request("GET", "/v1/states")["states"]

    def metrics(self):
        return self.request("GET", "/v1/metrics", raw=True).decode()


class EnvmgrEnv:
    """One env on an envmgr server, used like OSWorld's DesktopEnv.

    url, token: the server and its bearer token (token None: $ENVMGR_TOKEN or
    the file $ENVMGR_TOKEN_FILE names). image: the guest image; task_config:
    the default task for reset() (an OSWorld task dict, or a path the server
    resolves inside its --task-root). action_space is "computer_13" (actions
    are dicts) or "pyautogui" (actions are code strings, or "DONE", "FAIL",
    "WAIT"), both accepted either way; or a model's own tool: "anthropic" (an
    action is Claude's tool_use block or its input), "openai" (a computer_call
    item, one action or a list) or "uitars" (UI-TARS's action text). For those,
    display=(w, h) is the size the model sees the screen at (its coordinates are
    scaled back; default the screen's), coords ("absolute" or "relative_1000")
    is UI-TARS's convention, and step()'s info["answer"] is what the tool expects
    back (Anthropic's tool_result, OpenAI's computer_call_output; docs/computer-use.md).
    observation_type is OSWorld's: "screenshot" (default), "a11y_tree" or
    "screenshot_a11y_tree" (or DesktopEnv's require_a11y_tree=True); with a
    tree, obs["accessibility_tree"] is OSWorld's XML of the nodes that are
    showing (docs/agent-protocol.md; the image needs the guest toolbelt:
    image="apps"), and obs["screenshot"] is there too, as in OSWorld.
    DesktopEnv's provider arguments (provider_name, path_to_vm, ...) are
    accepted and ignored. vm_ip, _get_obs() and controller.start_recording()/
    end_recording(path) are there for OSWorld's run loop (lib_run_single).
    from_state: start the env from a saved state (save_state) instead of the golden state;
    the state names the image.
    The env is created at once and deleted by close() (or the with-block).
    """

    OBSERVATION_TYPES = ("screenshot", "a11y_tree", "screenshot_a11y_tree")
    TOOL_SPACES = ("anthropic", "openai", "uitars")
    ACTION_SPACES = ("computer_13", "pyautogui") + TOOL_SPACES

    # DesktopEnv's constructor arguments about its own VM provider: accepted so OSWorld's
    # construction line runs, and without effect (the server owns the VMs; docs/osworld.md)
    DESKTOPENV_ARGS = ("provider_name", "region", "path_to_vm", "snapshot_name", "cache_dir", "screen_size",
                       "headless", "require_terminal", "os_type", "enable_proxy", "client_password")

    def __init__(self, url, token=None, image=None, task_config=None, action_space="computer_13", timeout=600,
                 observation_type="screenshot", require_a11y_tree=False, from_state=None,
                 display=None, coords=None, **desktop_env_args):
        unknown = sorted(set(desktop_env_args) - set(self.DESKTOPENV_ARGS))
        if unknown:
            raise TypeError("EnvmgrEnv: unexpected argument %s" % unknown[0])
        if require_a11y_tree and observation_type == "screenshot":
            observation_type = "screenshot_a11y_tree"  # DesktopEnv's way of asking for the tree
        if action_space not in self.ACTION_SPACES:
            raise ValueError("action_space: expected one of " + ", ".join(self.ACTION_SPACES))
        if (display is not None or coords is not None) and action_space not in self.TOOL_SPACES:
            raise ValueError("display, coords: only for the action spaces " + ", ".join(self.TOOL_SPACES))
        self.display = list(display) if display is not None else None
        self.coords = coords
        if observation_type not in self.OBSERVATION_TYPES:
            raise ValueError("observation_type: expected one of " + ", ".join(self.OBSERVATION_TYPES))
        self.api = Client(url, token, timeout)
        self.action_space = action_space
        self.observation_type = observation_type
        body = {}
        if image:
            body["image"] = image
        if task_config is not None:
            body["task"] = task_config
        if from_state is not None:
            body["from_state"] = from_state
        info = self.api.request("POST", "/v1/envs", body)
        self.env_id = info["id"]
        self.screen_size = (info["width"], info["height"])
        self.instruction = None
        self.closed = False
        self.controller = _Controller(self)
        self._last_obs = None

    # -- OSWorld's DesktopEnv surface --------------------------------------------
    def reset(self, task_config=None, seed=None, options=None):
        """Restore the golden state, run the task's setup; returns the first observation."""
        body = {} if task_config is None else {"task": task_config}
        if self.observation_type != "screenshot":
            # OSWorld's env always hands over the screenshot and lets the agent choose what to read,
            # so a tree-only agent still gets obs["screenshot"] (run loops save it as step_N.png)
            body["observation"] = "screenshot_a11y_tree"
        r = self.api.request("POST", self._path("reset"), body)
        return self._obs(r["observation"])

    def step(self, action, pause=2):
        """Execute one action (computer_13 dict, pyautogui code, or "DONE"/"FAIL"/"WAIT");
        returns (observation, reward, done, info) like DesktopEnv.step.

        pause is accepted and not slept: OSWorld sleeps it so the screen can settle before its
        screenshot; the server already waits until the screen is still (--settle-ms) before it
        takes the observation, and the guest is paused while the agent thinks, so a sleep here
        would only spend the episode's time budget. info has OSWorld's keys ("done": True after
        DONE, "fail": True after FAIL) beside envmgr's (step, actions, step_ms, exit_cause)."""
        r = self.api.request("POST", self._path("step"), {"action": self._wrap(action)})
        obs = self._obs(r["observation"]) if r.get("observation") else None
        info = dict(r.get("info", {}))
        if "answer" in r:
            info["answer"] = r["answer"]
        cause = info.get("exit_cause")
        if cause in ("done", "fail"):
            info[cause] = True
        return obs, r.get("reward", 0), bool(r["done"]), info

    def _wrap(self, action):
        """A model's tool call as the API takes it: {"anthropic": ..., "display": [w, h]}."""
        if self.action_space not in self.TOOL_SPACES or (
                isinstance(action, dict) and (self.action_space in action or "action_type" in action)):
            return action  # already wrapped, or a computer_13 action such as {"action_type": "DONE"}
        wrapped = {self.action_space: action}
        if self.display is not None:
            wrapped["display"] = self.display
        if self.coords is not None:
            wrapped["coords"] = self.coords
        return wrapped

    def evaluate(self):
        """Score the episode (0..1); the reason is in .last_evaluation. Raises EnvmgrNoScore when
        the episode has no score (not evaluated, or its evaluator failed): never a 0 for it."""
        self.last_evaluation = self.api.request("POST", self._path("evaluate"), {})
        if self.last_evaluation.get("status", "scored") != "scored":
            raise EnvmgrNoScore(self.last_evaluation)
        return self.last_evaluation["score"]

    def close(self):
        if not self.closed:
            self.closed = True
            try:
                self.api.request("DELETE", "/v1/envs/" + self.env_id)
            except EnvmgrError as e:
                if e.status != 404:
                    raise

    @property
    def vm_ip(self):
        """The host name of the envmgr server (from url; "localhost" for a unix socket), where
        OSWorld's DesktopEnv has its VM's address. Agents pass it around (agent.reset(vm_ip=...))
        and may log it; an agent that talks to OSWorld's in-guest server on port 5000 itself does
        not work: the guest is reached only through the server's API (docs/osworld.md)."""
        if self.api.url.startswith("unix:"):
            return "localhost"
        return urllib.parse.urlsplit(self.api.url).hostname

    def _get_obs(self):
        """The observation now, as DesktopEnv._get_obs: a fresh screenshot; the other keys are the
        last observation's (the guest waits paused between steps, so its tree has not changed)."""
        if self._last_obs is None:
            raise RuntimeError("_get_obs: no episode yet (call reset first)")
        obs = dict(self._last_obs)
        obs["screenshot"] = self.screenshot()
        return obs

    # -- saved states (docs/states.md) ---------------------------------------------
    def save_state(self, name):
        """Save this moment of the env (its screen, memory, disk) as state `name` in the server's
        cache; the episode goes on. Returns what was saved (sizes, save_ms)."""
        return self.api.request("POST", self._path("state"), {"name": name})

    def load_state(self, name):
        """Bring the env back to state `name` (saved from an env of the same image) and start a new
        episode there with the current task (its setup is not run again); returns the first
        observation. evaluate() then scores this episode."""
        body = {"name": name}
        if self.observation_type != "screenshot":
            body["observation"] = self.observation_type
        r = self.api.request("POST", self._path("restore"), body)
        return self._obs(r["observation"])

    # -- more ----------------------------------------------------------------------
    def screenshot(self):
        """PNG bytes of the screen now."""
        return self.api.request("GET", self._path("screenshot"), raw=True)

    def trace(self, path):
        """Save the episode's trace (a tar of trace.jsonl, frames/ and a11y/) to path."""
        data = self.api.request("GET", self._path("trace"), raw=True)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def info(self):
        return self.api.request("GET", "/v1/envs/" + self.env_id)

    def live_url(self, ttl_s=3600, control=False):
        """A browser URL for watching the env (view-only unless control), carrying a live-view token
        that opens only this env's live view and expires after ttl_s seconds (never the API token)."""
        r = self.api.request("POST", self._path("live-token"), {"ttl_s": ttl_s, "control": bool(control)})
        return self.api.url + r["url"]

    def _path(self, what):
        return "/v1/envs/%s/%s" % (self.env_id, what)

    def _obs(self, o):
        self.instruction = o.get("instruction")
        shot = o.get("screenshot")
        self._last_obs = {
            "screenshot": base64.b64decode(shot) if shot else None,
            "instruction": o.get("instruction"),
            "step": o.get("step"),
            "width": o.get("width"),
            "height": o.get("height"),
            "screenshot_sha256": o.get("screenshot_sha256"),
            "accessibility_tree": o.get("accessibility_tree"),  # OSWorld's XML, with a tree observation
            "a11y_tree_sha256": o.get("a11y_tree_sha256"),
            # DesktopEnv's other key, so agents that read it keep working
            "terminal": None,
        }
        return dict(self._last_obs)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _Controller:
    """env.controller: the part of OSWorld's PythonController its run loop uses. The video comes
    from the episode's trace (every observation since reset is in it), built by the server
    (GET /v1/envs/{id}/video), so recording costs the guest nothing."""

    def __init__(self, env):
        self.env = env
        self.recording = False

    def start_recording(self):
        """Marks the recording as started; the video covers the whole episode from its reset."""
        self.recording = True

    def end_recording(self, dest):
        """Write the episode's video (H.264 mp4, one frame per observation) to dest."""
        data = self.env.api.request("GET", self.env._path("video"), raw=True)
        with open(dest, "wb") as f:
            f.write(data)
        self.recording = False
        return dest

    def get_screenshot(self):
        """PNG bytes of the screen now."""
        return self.env.screenshot()
