#!/usr/bin/env bash
# docs/osworld.md's tables are generated from envmgr's own tables (`envmgr task pieces`): they must
# be in sync with the code (`make osworld-doc` rewrites them). No VM. Prints `osworld_doc: N passed, N failed`.
SUITE=osworld_doc
source "$(dirname "$0")/lib.sh"
check "docs/osworld.md is in sync with envmgr task pieces" env ENVMGR_BIN="$ENVMGR" "$ROOT/scripts/gen-osworld-doc" --check
"$ENVMGR" task pieces --json >"$T/pieces.json"
check "every setup step type task.c parses has a row" python3 -c "
import json,sys; p=json.load(open(sys.argv[1])); names={x['name'] for x in p if x['kind']=='setup'}
assert {'execute','download','chrome_open_tabs','googledrive','act'} <= names, names" "$T/pieces.json"
check "the metric rows are OSWorld's names, each with a status" python3 -c "
import json,sys; p=[x for x in json.load(open(sys.argv[1])) if x['kind']=='metric']
assert len(p) > 100 and all(x['status'] for x in p)" "$T/pieces.json"
finish
