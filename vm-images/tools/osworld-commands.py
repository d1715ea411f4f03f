#!/usr/bin/python3
"""List the executables OSWorld-Verified's tasks run in the guest.

Reads every task of test_all.json: the setup and postconfig steps `command`,
`execute` and `launch`, and the getters that run a command
(`vm_command_line`, `vm_command_error`).  Prints one line per executable,
`NAME<TAB>N tasks<TAB>first task ids`, sorted.  vm-images/apps/osworld-commands.list
is its output's first column minus what the image cannot have (see that file);
`image_check` in apps/build.sh checks each name is on the image's PATH.

Usage: osworld-commands.py EVALUATION_EXAMPLES_DIR [--names]
"""
import json
import re
import shlex
import sys
from collections import defaultdict

# Shell words that are not programs, and wrappers whose next word is one.
KEYWORDS = {"if", "then", "else", "elif", "fi", "for", "do", "done", "while", "until", "case", "esac",
            "in", "function", "!", "{", "}", "[[", "]]", "(", ")", "time"}
BUILTINS = {"cd", "export", "echo", "[", "test", "true", "false", "exit", "history", "source", ".",
            "read", "set", "unset", "local", "return", "printf", "eval", "exec", "shift", "type",
            "command", "wait", "trap", "alias"}
WRAPPERS = {"sudo", "timeout", "env", "nohup", "runuser", "xargs"}
OPERATORS = set(";&|()\n")
NAME = re.compile(r"^[A-Za-z0-9_./+-]+$")


def substitutions(script):
    """The script with each $( ... ) replaced by a word, and the substitutions' scripts."""
    out, subs, i = [], [], 0
    while True:
        j = script.find("$(", i)
        if j < 0:
            out.append(script[i:])
            return "".join(out), subs
        depth, k = 1, j + 2
        while k < len(script) and depth:
            depth += {"(": 1, ")": -1}.get(script[k], 0)
            k += 1
        out.append(script[i:j] + "SUBST")
        subs.append(script[j + 2:k - 1])
        i = k


def simple_commands(script):
    """The first word of each simple command of a shell script, substitutions included."""
    script, subs = substitutions(script)
    names = [n for s in subs for n in simple_commands(s)]
    lex = shlex.shlex(script.replace("\n", ";").replace("`", ";"), posix=True, punctuation_chars=";&|()")
    lex.whitespace_split = True
    at_start, skip = True, 0
    try:
        tokens = list(lex)
    except ValueError:
        tokens = script.split()
    for w in tokens:
        if w and set(w) <= OPERATORS:
            at_start = True
            continue
        if not at_start:
            continue
        if skip:
            skip -= 1
            continue
        if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w) or w in KEYWORDS:
            continue
        if w in WRAPPERS:
            continue
        if w.startswith("-") or re.match(r"^[0-9.]+[smh]?$", w):
            skip = 1 if w == "-u" else 0
            continue
        if NAME.match(w):
            names.append(w)
        at_start = False
    return names


def executables(cmd, shell):
    if cmd is None:
        return []
    if isinstance(cmd, list):
        if shell:
            return simple_commands(" ".join(cmd))
        first = cmd[0]
        if first in ("/bin/bash", "bash", "/bin/sh", "sh") and len(cmd) > 2 and cmd[1] == "-c":
            return [first] + simple_commands(cmd[2])
        return [first]
    return simple_commands(cmd)


def main(argv):
    if len(argv) < 2:
        sys.exit("usage: osworld-commands.py EVALUATION_EXAMPLES_DIR [--names]")
    root = argv[1]
    uses = defaultdict(set)
    with open(f"{root}/test_all.json") as f:
        index = json.load(f)
    for domain, ids in index.items():
        for tid in ids:
            with open(f"{root}/examples/{domain}/{tid}.json") as f:
                task = json.load(f)
            ev = task.get("evaluator", {})
            steps = list(task.get("config", [])) + list(ev.get("postconfig", []))
            found = []
            for s in steps:
                if s.get("type") in ("command", "execute", "launch"):
                    p = s.get("parameters", {})
                    found += executables(p.get("command"), p.get("shell", False))
            for key in ("result", "expected"):
                v = ev.get(key)
                for g in v if isinstance(v, list) else [v]:
                    if isinstance(g, dict) and g.get("type") in ("vm_command_line", "vm_command_error"):
                        found += executables(g.get("command"), g.get("shell", False))
            for name in found:
                if name in BUILTINS or "{" in name:
                    continue
                uses[name].add(f"{domain}/{tid}")
    for name in sorted(uses):
        if "--names" in argv:
            print(name)
        else:
            t = sorted(uses[name])
            print(f"{name}\t{len(t)}\t{' '.join(x.split('/')[0] + '/' + x.split('/')[1][:8] for x in t[:4])}")


if __name__ == "__main__":
    main(sys.argv)
