"""OpenAI's computer-use tool driving an envmgr env: the loop of OpenAI's computer-use guide, with
envmgr as the computer. Each computer_call item of a response (one action, or a batch in `actions`)
goes to env.step() as it is; envmgr answers with the computer_call_output to send back (the
screenshot as a data URL, with the call's call_id).

    python3 openai_computer_use.py URL TOKEN TASK [--transcript FILE]

With an OpenAI API key and the `openai` package, model_turn() calls the model (see the comment in it);
without one, --transcript replays a recorded run's computer_call items in its place (make test does
that with tests/data/computer-use/openai-terminal-mkdir-tree.json). Prints the score.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from envmgr_client import EnvmgrEnv  # noqa: E402

TOOL = {"type": "computer_use_preview", "display_width": 1280, "display_height": 800, "environment": "linux"}


def recorded_model(path):
    """A stand-in for the model: each turn returns the next recorded computer_call (or a message)."""
    with open(path, encoding="utf-8") as f:
        calls = [c for c in json.load(f)["calls"] if "action_type" not in c]

    def turn(items):
        return [calls.pop(0)] if calls else [{"type": "message", "content": [{"type": "output_text", "text": "Done."}]}]
    return turn


def openai_model():
    """The model itself (needs the openai package and OPENAI_API_KEY)."""
    import openai
    client, previous = openai.OpenAI(), [None]

    def turn(items):
        r = client.responses.create(model="computer-use-preview", tools=[TOOL], input=items, truncation="auto",
                                    previous_response_id=previous[0])
        previous[0] = r.id
        return [o.model_dump() for o in r.output]
    return turn


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("token")
    ap.add_argument("task", help="a task path inside the server's --task-root")
    ap.add_argument("--transcript", help="replay these computer_call items instead of calling the model")
    ap.add_argument("--max-turns", type=int, default=30)
    args = ap.parse_args()
    model_turn = recorded_model(args.transcript) if args.transcript else openai_model()

    with EnvmgrEnv(args.url, args.token, task_config=args.task, action_space="openai") as env:
        obs = env.reset()
        items = [{"role": "user", "content": obs["instruction"]}]
        for _ in range(args.max_turns):
            output = model_turn(items)
            calls = [o for o in output if o.get("type") == "computer_call"]
            if not calls:  # a message and no call: the model considers the task done
                env.step({"action_type": "DONE"})
                break
            items = []
            for call in calls:
                obs, reward, done, info = env.step(call)  # the item as the model sent it
                items.append(info["answer"])              # a computer_call_output for its call_id
        print("score %.1f" % env.evaluate())


if __name__ == "__main__":
    main()
