#!/usr/bin/env bash
# `envmgr image import` (issue 41): every refusal of a hostile disk is one line, exit 2, and leaves
# the image root as it was; then a disk with its own bootloader (built here from Debian packages:
# tests/tools/make-boot-disk.sh, cached by its inputs) is imported with guest interface none: its
# golden state is made once its screen settles, and up, screenshot, act, reset, run, down,
# image ls/verify/rm and doctor work on it; a task that needs the guest is refused at plan time.
. "$(dirname "$0")/lib.sh"

# The test disk (its kernel and initramfs are the built desktop image's), then this run's own image
# root and cache (the imported image's golden state is this run's, not the operator's).
BOOT=$("$ROOT/tests/tools/boot-disk.sh") && RESTLESS=$("$ROOT/tests/tools/boot-disk.sh" --restless) ||
    { bad "the boot disks (tests/tools/boot-disk.sh: the desktop image, scripts/install-deps)"; finish; exit; }
import_scratch
mkdir -p "$T/d"

PROGRESS='checked in [0-9.]* s; copying\|building the golden state of\|^usage: '
tree() { find "$ENVMGR_IMAGE_DIR" -printf '%p %s %M\n' | sort; }
BEFORE=$(tree)
# refuse LABEL FIELD_RE ARGS...: `image import ARGS` exits 2 with one line matching FIELD_RE, and the
# image root is unchanged
refuse() {
    local label=$1 re=$2 out rc; shift 2
    out=$("$ENVMGR" image import "$@" 2>&1); rc=$?
    # one line, besides progress (the checks passed, the golden state's boot begun)
    if [ $rc = 2 ] && [ "$(printf '%s\n' "$out" | grep -vc "$PROGRESS")" = 1 ] &&
        printf '%s' "$out" | grep -q -- "$re" && [ "$(tree)" = "$BEFORE" ]; then
        ok "refused: $label"
    else
        bad "refused: $label (exit $rc): $out"
    fi
}
d=$T/d
qemu-img create -q -f qcow2 "$d/base.qcow2" 16M
qemu-img create -q -f qcow2 -b "$d/base.qcow2" -F qcow2 "$d/backing.qcow2"
refuse "a backing file" "backing_file_offset: the disk names a backing file" x "$d/backing.qcow2"
# the same disk with its header's backing fields cleared but a backing-format extension kept
cp "$d/backing.qcow2" "$d/backing-ext.qcow2"
python3 - "$d/backing-ext.qcow2" <<'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(8); f.write(bytes(12))   # backing_file_offset, backing_file_size
PY
refuse "a backing-format header extension" "extension backing-format" x "$d/backing-ext.qcow2"
qemu-img create -q -f qcow2 -o data_file="$d/data.raw" "$d/datafile.qcow2" 16M
refuse "an external data file" "external data file" x "$d/datafile.qcow2"
qemu-img create -q -f vmdk "$d/disk.vmdk" 16M
refuse "a vmdk" "format: the disk is vmdk" x "$d/disk.vmdk"
qemu-img create -q -f vpc -o subformat=dynamic "$d/disk.vhd" 16M
refuse "a vpc (VHD)" "format: the disk is vpc" x "$d/disk.vhd"
qemu-img create -q -f vdi "$d/disk.vdi" 16M
refuse "a vdi" "format: the disk is vdi" x "$d/disk.vdi"
qemu-img create -q -f qcow2 "$d/huge.qcow2" 300G
refuse "a qcow2 of 300 GiB (sparse)" "size: the virtual disk is 300 GiB, over the bound of 256 GiB" x "$d/huge.qcow2"
truncate -s 300G "$d/huge.raw"
refuse "a raw file of 300 GiB (sparse)" "size: the disk file is 300 GiB, over the bound" x "$d/huge.raw"
ENVMGR_IMPORT_MAX_GIB=1 refuse "ENVMGR_IMPORT_MAX_GIB=1 and a 2 GiB qcow2" "over the bound of 1 GiB" x \
    "$(qemu-img create -q -f qcow2 "$d/two.qcow2" 2G && echo "$d/two.qcow2")"
cp "$d/base.qcow2" "$d/encrypted.qcow2"
python3 -c "import sys; f=open(sys.argv[1],'r+b'); f.seek(32); f.write((2).to_bytes(4,'big'))" "$d/encrypted.qcow2"
refuse "an encrypted qcow2 (crypt_method LUKS)" "crypt_method 2: the disk is encrypted" x "$d/encrypted.qcow2"
cp "$d/base.qcow2" "$d/corrupt.qcow2"   # the refcount table's offset not cluster-aligned: qemu-img refuses the header
python3 -c "import sys; f=open(sys.argv[1],'r+b'); f.seek(48); f.write((0x12345).to_bytes(8,'big'))" "$d/corrupt.qcow2"
refuse "a corrupt header (qemu-img info fails)" "qemu-img info: .*the header is corrupt" x "$d/corrupt.qcow2"
cp "$d/base.qcow2" "$d/corrupt-l1.qcow2"   # the L1 table pointing past the file: qemu-img check finds it
python3 - "$d/corrupt-l1.qcow2" <<'PY'
import struct, sys
with open(sys.argv[1], "r+b") as f:
    f.seek(40); l1 = struct.unpack(">Q", f.read(8))[0]
    f.seek(l1); f.write(struct.pack(">Q", (1 << 63) | (1 << 40)))  # cluster 1 TiB into a 200 KiB file
PY
refuse "a corrupt L1 table (qemu-img check)" "qemu-img check: .*corrupt" x "$d/corrupt-l1.qcow2"
python3 -c "import sys; f=open(sys.argv[1],'r+b'); f.seek(4); f.write((7).to_bytes(4,'big'))" "$d/base.qcow2" 2>/dev/null
refuse "a qcow2 header of version 7" "qcow2 header: version 7" x "$d/base.qcow2"
refuse "a disk that is not there" "disk .*No such file" x "$d/nothing.qcow2"
refuse "a FIFO" "not a regular file" x "$(mkfifo "$d/fifo" && echo "$d/fifo")"
refuse "--guest envmgr: only for built images" "--guest envmgr: only for images envmgr builds" x "$BOOT" --guest envmgr
refuse "--guest nonsense" "--guest: expected envmgr, osworld, qga or none" x "$BOOT" --guest nonsense
refuse "a bad name" "image" "../x" "$BOOT"
refuse "--screen 10x10" "--screen: expected WxH" x "$BOOT" --screen 10x10
# A guest that never settles within its bound (it prints without end): its image and golden state are
# not kept.
refuse "a guest whose screen does not settle within --ready-timeout 20" \
    "did not settle .* within 20 s" slow "$RESTLESS" --screen 720x400 --memory 256 --ready-timeout 20 --accel tcg
check "the unsettled guest left no golden state" test -z "$(ls "$ENVMGR_CACHE_DIR/golden" 2>/dev/null | grep -v '\.lock$')"
check "the unsettled guest left no QEMU" no_qemu_under "$ENVMGR_RUN_DIR/"

# The real import.
t0=$(date +%s.%N)
out=$("$ENVMGR" image import boot "$BOOT" --screen 720x400 --memory 256 --ready-timeout 180 --accel tcg 2>&1); rc=$?
t1=$(date +%s.%N)
check "import the bootloader disk (guest none): exit 0" test $rc = 0
[ $rc = 0 ] || printf '%s\n' "$out"
echo "   import + golden state: $(python3 -c "print(f'{$t1-$t0:.1f}')") s; $(printf '%s\n' "$out" | grep -o 'golden state ready in.*')"
check "image ls: boot, guest none, imported" bash -c "'$ENVMGR' image ls | grep -E '^boot +[^ ]+ +none +.*/boot \(imported\)$'"
check "image verify boot" "$ENVMGR" image verify boot
check "doctor lists it" bash -c "'$ENVMGR' doctor 2>&1 | grep -q 'image boot '"
check "the manifest: no kernel, guest none, firmware bios, machine pc, the source's sha256" python3 - \
    "$ENVMGR_IMAGE_DIR/boot/manifest.json" "$(sha256sum "$BOOT" | cut -d' ' -f1)" <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); b = m["boot"]
ok = ("kernel" not in b and m["guest"] == "none" and b["firmware"] == "bios" and b["machine"] == "pc" and
      m["imported"]["source_sha256"] == sys.argv[2] and m["imported"]["source_format"] == "raw" and
      list(m["files"]) == ["disk.qcow2"] and (b["width"], b["height"], b["memory_mb"]) == (720, 400, 256))
sys.exit(0 if ok else 1)
PY
check "the kept disk is envmgr's qcow2 copy, read-only" bash -c \
    "qemu-img info --output=json -f qcow2 '$ENVMGR_IMAGE_DIR/boot/disk.qcow2' | grep -q '\"format\": \"qcow2\"' && [ ! -w '$ENVMGR_IMAGE_DIR/boot/disk.qcow2' ] || [ \$(id -u) = 0 ]"
BEFORE=$(tree)
refuse "a name that exists" "image .boot. exists" boot "$BOOT"

E=imp-$$
check "up --image boot" "$ENVMGR" up --name $E --image boot --accel tcg
shot $E "$T/s0.png" && ok "screenshot" || bad "screenshot"
check "the screenshot is the manifest's 720x400" bash -c "'$PNGTOOL' info '$T/s0.png' | grep -q '^720 400'"
act $E '{"action_type":"TYPING","text":"echo envmgr-$((6*7))\n"}' >/dev/null && ok "act (typing over VNC)" || bad "act"
sleep 1
shot $E "$T/s1.png"
check "the typed line changed the screen" bash -c "! cmp -s '$T/s0.png' '$T/s1.png'"
t0=$(date +%s.%N)
out=$("$ENVMGR" reset $E 2>&1); rc=$?
t1=$(date +%s.%N)
check "reset" test $rc = 0
echo "   reset: $(python3 -c "print(f'{($t1-$t0)*1000:.0f}')") ms wall ($out)"
shot $E "$T/s2.png"
check "after reset the screen is the golden state's again" cmp -s "$T/s0.png" "$T/s2.png"
# firmware_of ENV: the guest says on its serial console (QEMU's ring, read over QMP) whether it booted
# under UEFI (/sys/firmware/efi) or BIOS
firmware_of() {
    act "$1" '{"action_type":"TYPING","text":"mkdir -p /sys /dev; mount -t sysfs s /sys; mount -t devtmpfs d /dev; if [ -d /sys/firmware/efi ]; then echo FW=uefi; else echo FW=bios; fi >/dev/ttyS0\n"}' >/dev/null
    python3 - "$ENVMGR_RUN_DIR/$1/qmp.sock" <<'PY'
import json, socket, sys, time
s = socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(sys.argv[1]); f = s.makefile("rw"); f.readline()
def call(cmd, **args):
    f.write(json.dumps({"execute": cmd, "arguments": args} if args else {"execute": cmd}) + "\n"); f.flush()
    while True:
        r = json.loads(f.readline())
        if "return" in r or "error" in r:
            return r.get("return", "")
call("qmp_capabilities")
seen = ""
for _ in range(40):
    seen += call("ringbuf-read", device="serial0", size=65536, format="utf8")
    if "FW=" in seen:
        break
    time.sleep(0.25)
print(seen[seen.find("FW="):].split()[0] if "FW=" in seen else "FW=?")
PY
}
check "the imported image booted by SeaBIOS (--firmware bios)" test "$(firmware_of $E)" = FW=bios
"$ENVMGR" reset $E >/dev/null

# Saved states: the typed line saved, a reset, the state restored shows it again.
act $E '{"action_type":"TYPING","text":"echo saved-state\n"}' >/dev/null
sleep 1
shot $E "$T/s3.png"
check "state save on the imported image" "$ENVMGR" state save $E imp-typed
"$ENVMGR" reset $E >/dev/null
check "state restore on the imported image" "$ENVMGR" state restore $E imp-typed
shot $E "$T/s4.png"
check "the restored state's screen is the saved one" cmp -s "$T/s3.png" "$T/s4.png"
"$ENVMGR" reset $E >/dev/null
out=$("$ENVMGR" image rm boot 2>&1); rc=$?
check "image rm while an env runs on it: exit 2, naming the env" bash -c "[ $rc = 2 ] && printf '%s' '$out' | grep -q 'env $E runs on it'"

# Tasks: one that needs the guest is refused at plan time, naming the step; one that does not runs.
cat >"$T/guest.json" <<'J'
{"id": "g", "instruction": "x", "config": [{"type": "sleep", "parameters": {"seconds": 0.1}},
 {"type": "execute", "parameters": {"command": ["true"]}}], "evaluator": {"func": "infeasible"}}
J
out=$("$ENVMGR" run "$T/guest.json" --image boot --agent "$ROOT/tasks/agents/null" --out "$T/g" 2>&1); rc=$?
check "a task with a guest setup step on a none image: exit 2, one line naming config[1] execute" bash -c \
    "[ $rc = 2 ] && [ \$(printf '%s\n' \"\$1\" | wc -l) = 1 ] && printf '%s' \"\$1\" | grep -q 'config\[1\]: execute needs the guest'" _ "$out"
cat >"$T/getter.json" <<'J'
{"id": "f", "instruction": "x", "evaluator": {"func": "exact_match", "result": {"type": "vm_file", "path": "/etc/hostname", "dest": "h"},
 "expected": {"type": "rule", "rules": {"expected": "x"}}}}
J
out=$("$ENVMGR" run "$T/getter.json" --env $E --agent "$ROOT/tasks/agents/null" --out "$T/f" 2>&1); rc=$?
check "a vm_file getter, in the env on it (--env): exit 2 naming evaluator.result[0]" bash -c \
    "[ $rc = 2 ] && printf '%s' \"\$1\" | grep -q 'evaluator.result\[0\]: vm_file needs the guest'" _ "$out"
check "refused tasks started no env" test -z "$(ls "$ENVMGR_RUN_DIR" | grep run- || true)"
cat >"$T/screen.json" <<'J'
{"id": "s", "instruction": "look at the console", "config": [{"type": "sleep", "parameters": {"seconds": 0.1}}],
 "evaluator": {"func": "infeasible"}}
J
out=$(timeout 20 "$ENVMGR" exec $E -- true 2>&1); rc=$?
check "exec on a none env: exit 2 at once, one line" bash -c \
    "[ $rc = 2 ] && [ \$(printf '%s\n' \"\$1\" | wc -l) = 1 ] && printf '%s' \"\$1\" | grep -q 'has no envmgr guest agent (guest none'" _ "$out"
out=$("$ENVMGR" run "$T/screen.json" --env $E --agent "$ROOT/tasks/agents/null" --out "$T/run" 2>&1); rc=$?
check "a task that needs only the screen runs on it (exit 0)" test $rc = 0
check "its trace verifies" "$ENVMGR" trace verify "$T/run/trace"

# A suite on the imported image (--image): the same results tree, summary and JUnit as on a built one.
mkdir -p "$T/suite" && cp "$T/screen.json" "$T/suite/"
out=$("$ENVMGR" suite run "$T/suite" --image boot --agent "$ROOT/tasks/agents/null" --envs 1 --accel tcg \
    --progress plain --out "$T/suite-out" 2>&1); rc=$?
check "suite run --image boot: exit 0" test $rc = 0
check "suite run --image boot: results.jsonl, summary.json, junit.xml and the episode's trace" bash -c \
    "[ -s '$T/suite-out/results.jsonl' ] && [ -s '$T/suite-out/summary.json' ] && [ -s '$T/suite-out/junit.xml' ] &&
     ls '$T/suite-out'/*/s*/trace/trace.jsonl >/dev/null 2>&1 || find '$T/suite-out' -name trace.jsonl | grep -q ."
check "down" "$ENVMGR" down $E
check "image rm boot" "$ENVMGR" image rm boot
check "image ls no longer lists it" bash -c "! '$ENVMGR' image ls | grep -q '^boot '"
check "the image root is empty again" test -z "$(ls -A "$ENVMGR_IMAGE_DIR")"
out=$("$ENVMGR" image rm boot 2>&1); rc=$?
check "image rm of an image that is not there: exit 2" test $rc = 2
# gc: the work folder of an import whose envmgr was killed goes, a live one's stays; the removed image's
# golden state goes
mkdir -p "$ENVMGR_IMAGE_DIR/.import-dead.4194303.aB3dE9" "$ENVMGR_IMAGE_DIR/.import-live.$$.aB3dE9"
"$ROOT/scripts/stop-ram-servers" "$T"   # the setup cache's state of the run above maps the golden RAM
"$ENVMGR" gc >"$T/gc.out" 2>&1
check "gc removes a killed import's work folder" bash -c "! [ -e '$ENVMGR_IMAGE_DIR/.import-dead.4194303.aB3dE9' ] && grep -q 'import-dead.*killed' '$T/gc.out'"
check "gc keeps a running import's work folder" test -d "$ENVMGR_IMAGE_DIR/.import-live.$$.aB3dE9"
check "gc removes the removed image's golden state" bash -c "grep -q 'remove the golden state .*its image .* is gone' '$T/gc.out' && [ -z \"\$(ls '$ENVMGR_CACHE_DIR/golden' | grep -v lock)\" ]"
rmdir "$ENVMGR_IMAGE_DIR/.import-live.$$.aB3dE9"
check "no QEMU left" no_qemu_under "$ENVMGR_RUN_DIR/"

# bash completion: image's subcommands and import's option values
complete_words() {
    PATH="$(dirname "$ENVMGR"):$PATH" bash -c 'source "$0"; COMP_WORDS=("${@}"); COMP_CWORD=$(($# - 1)); _envmgr; echo "${COMPREPLY[*]}"' \
        "$ROOT/completion/envmgr.bash" "$@"
}
check "envmgr image <TAB> offers import and rm" test "$(complete_words envmgr image '')" = "verify list import rm"
check "envmgr image import x d --guest <TAB>" test "$(complete_words envmgr image import x d --guest '')" = "none envmgr osworld qga"
check "envmgr image import x d --firmware <TAB>" test "$(complete_words envmgr image import x d --firmware '')" = "bios uefi"
# The same disk under OVMF (--firmware uefi: it is an EFI system partition too), or refused without OVMF.
BEFORE=$(tree)
if [ -r /usr/share/ovmf/OVMF.fd ] || [ -r /usr/share/qemu/OVMF.fd ]; then
    out=$("$ENVMGR" image import uboot "$BOOT" --firmware uefi --screen 720x400 --memory 256 --ready-timeout 240 \
        --accel tcg 2>&1); rc=$?
    check "import --firmware uefi: exit 0, golden state made" test $rc = 0
    [ $rc = 0 ] || printf '%s\n' "$out"
    echo "   uefi: $(printf '%s\n' "$out" | grep -o 'golden state ready in.*')"
    check "uefi: the manifest says boot.firmware uefi" grep -q '"firmware": "uefi"' "$ENVMGR_IMAGE_DIR/uboot/manifest.json"
    U=impu-$$
    check "uefi: up" "$ENVMGR" up --name $U --image uboot --accel tcg
    check "uefi: the guest booted under UEFI" test "$(firmware_of $U)" = FW=uefi
    check "uefi: reset" "$ENVMGR" reset $U
    check "uefi: down and image rm" bash -c "'$ENVMGR' down $U && '$ENVMGR' image rm uboot"
else
    refuse "--firmware uefi without OVMF installed" "--firmware uefi: needs OVMF" x "$BOOT" --firmware uefi
fi
ENVMGR_OVMF=/nonexistent refuse "--firmware uefi when OVMF is not there (ENVMGR_OVMF)" "--firmware uefi: needs OVMF" \
    x "$BOOT" --firmware uefi
finish
