"""Claude's computer tool driving an envmgr env: the agent loop of Anthropic's computer-use docs, with
envmgr as the computer. Each tool_use block Claude returns goes to env.step() as it is; envmgr answers
with the tool_result to put in the next user message (the screenshot scaled to the display the tool
was declared with, or the cursor's position), so no translation layer is written here.

    python3 claude_computer_use.py URL TOKEN TASK [--transcript FILE]

With an Anthropic API key and the `anthropic` package, model_turn() calls Claude (see the comment in
it); without one, --transcript replays a recorded conversation's tool calls in its place (make test
does that with tests/data/computer-use/anthropic-terminal-mkdir-tree.json). Prints the score.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from envmgr_client import EnvmgrEnv  # noqa: E402

DISPLAY = (1024, 640)  # what the tool is declared with: display_width_px, display_height_px
TOOL = {"type": "computer_20250124", "name": "computer",
        "display_width_px": DISPLAY[0], "display_height_px": DISPLAY[1]}


def recorded_model(path):
    """A stand-in for Claude: each turn returns the next recorded tool_use block (or none: done)."""
    with open(path, encoding="utf-8") as f:
        calls = [c for c in json.load(f)["calls"] if "action_type" not in c]

    def turn(messages):
        return [calls.pop(0)] if calls else [{"type": "text", "text": "The task is done."}]
    return turn


def claude_model():
    """Claude itself (needs the anthropic package and ANTHROPIC_API_KEY)."""
    import anthropic
    client = anthropic.Anthropic()

    def turn(messages):
        r = client.beta.messages.create(model="claude-sonnet-4-5", max_tokens=1024, tools=[TOOL],
                                        messages=messages, betas=["computer-use-2025-01-24"])
        return [b.model_dump() for b in r.content]
    return turn


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("token")
    ap.add_argument("task", help="a task path inside the server's --task-root")
    ap.add_argument("--transcript", help="replay these tool calls instead of calling Claude")
    ap.add_argument("--max-turns", type=int, default=30)
    args = ap.parse_args()
    model_turn = recorded_model(args.transcript) if args.transcript else claude_model()

    with EnvmgrEnv(args.url, args.token, task_config=args.task, action_space="anthropic", display=DISPLAY) as env:
        obs = env.reset()
        messages = [{"role": "user", "content": obs["instruction"]}]
        for _ in range(args.max_turns):
            blocks = model_turn(messages)
            messages.append({"role": "assistant", "content": blocks})
            tool_uses = [b for b in blocks if b.get("type") == "tool_use"]
            if not tool_uses:  # Claude answered without a tool: it considers the task done
                env.step({"action_type": "DONE"})
                break
            results = []
            for block in tool_uses:
                obs, reward, done, info = env.step(block)  # the block as Claude sent it
                results.append(info["answer"])              # a tool_result for that tool_use_id
            messages.append({"role": "user", "content": results})
        print("score %.1f" % env.evaluate())


if __name__ == "__main__":
    main()
