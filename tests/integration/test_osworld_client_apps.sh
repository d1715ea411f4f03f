#!/usr/bin/env bash
# test_osworld_client.sh on the apps image (issue 31: OSWorld's call sequence on the image its tasks
# were written for). SKIPPED unless ENVMGR_APPS=1 (`make test-apps`).
if [ "${ENVMGR_APPS:-0}" != 1 ]; then
    echo "osworld_client_apps: skipped (set ENVMGR_APPS=1 to boot the apps image)"
    echo "osworld_client_apps: 0 passed, 0 failed"
    exit 0
fi
OSWORLD_CLIENT_IMAGE=apps exec "$(dirname "$0")/test_osworld_client.sh"
