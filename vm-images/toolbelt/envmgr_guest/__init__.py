"""envmgr's guest toolbelt: getters the host calls through the guest agent
(`envmgr-guest SUBCOMMAND ...`, one JSON document on stdout) and the
accessibility-tree dumper."""
VERSION = 1
