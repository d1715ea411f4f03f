# The build steps every image recipe shares.  Sourced (never executed) by an
# image's build.sh after lib/common.sh and its image.conf:
#
#   HERE=<the image's directory>  LIB=<this directory>
#   . "$LIB/common.sh"; . "$HERE/image.conf"; . "$LIB/recipe.sh"
#   image_configure() { ...; }     # optional: image-specific configuration
#   image_check() { ...; }         # optional: image-specific build-time checks
#   recipe_main "$@"               # OUTDIR WORKDIR
#
# image.conf sets SUITE, ARCH, FS_SIZE, GUEST_USER, GUEST_PASSWORD, BOOT_* and
# LAYERS: recipe directories (siblings of lib/) applied in that order.  From
# each layer the build takes packages.list (all are installed in one apt run),
# overlay/ (copied over the root file system; later layers win) and
# xfconf-defaults (merged into the XFCE defaults).  The desktop image is the
# layer "desktop"; the apps image is "desktop apps".  TOOLBELT=1 installs
# ../toolbelt (pyautogui, envmgr-guest).
#
# Environment (from ../build-image.sh): MIRROR, SECURITY_MIRROR (may be
# empty), INPUT_KEY.  WORKDIR (the root file system, the raw disk) is deleted
# on any exit, after unmounting what was mounted in it.
# shellcheck shell=bash

IMAGES_DIR=$(cd "$LIB/.." && pwd)
: "${LAYERS:?image.conf must set LAYERS}"
: "${TOOLBELT:=0}"

# ----------------------------------------------------------------- helpers
# step NAME FUNCTION: run one build step, record its wall time.
step() {
    local name=$1 t0 t1
    shift
    log "$name ..."
    t0=$(date +%s.%N)
    "$@"
    t1=$(date +%s.%N)
    awk -v n="$name" -v a="$t0" -v b="$t1" 'BEGIN { printf "%-14s %6.1f s\n", n, b - a }' >>"$TIMES"
}

in_root() { chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
                LC_ALL=C.UTF-8 DEBIAN_FRONTEND=noninteractive HOME=/root "$@"; }

# in_root_user CMD...: run as the guest user in the chroot, with its home.
in_root_user() { chroot --userspec="$GUEST_USER:$GUEST_USER" "$ROOT" /usr/bin/env -i \
                     PATH=/usr/local/bin:/usr/bin:/bin LC_ALL=C.UTF-8 LANG=C.UTF-8 \
                     HOME="/home/$GUEST_USER" USER="$GUEST_USER" "$@"; }

mount_chroot() {
    mountpoint -q "$ROOT/proc" || mount -t proc proc "$ROOT/proc"
    mountpoint -q "$ROOT/sys"  || mount -t sysfs sysfs "$ROOT/sys"
    mkdir -p "$ROOT/dev/pts" "$ROOT/dev/shm"
    mountpoint -q "$ROOT/dev/pts" ||
        mount -t devpts -o newinstance,ptmxmode=0666 devpts "$ROOT/dev/pts"
    # Browsers and GIMP's plug-ins need shared memory for the first runs.
    mountpoint -q "$ROOT/dev/shm" || mount -t tmpfs -o mode=1777,size=512m shm "$ROOT/dev/shm"
}

layer_files() {     # layer_files NAME: the existing NAME of every layer, in order
    local l
    for l in $LAYERS; do
        [ -e "$IMAGES_DIR/$l/$1" ] && printf '%s\n' "$IMAGES_DIR/$l/$1"
    done
    return 0
}

# ----------------------------------------------------------------- steps
do_debootstrap() {
    # minbase: dpkg, apt and essentials only; everything else comes from
    # packages.list so that the image holds exactly what is listed (+ deps).
    run_logged "$LOG" debootstrap --variant=minbase --arch="$ARCH" \
        --components=main "$SUITE" "$ROOT" "$MIRROR"
}

do_prepare() {
    # Never start daemons inside the build chroot.
    printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d"
    chmod 755 "$ROOT/usr/sbin/policy-rc.d"

    # Build-time only (deleted in do_finish): skip fsync, the rootfs is
    # thrown away if the build dies.
    echo force-unsafe-io >"$ROOT/etc/dpkg/dpkg.cfg.d/zz-envmgr-build"

    # Kept in the guest: no Recommends, and no docs, manuals or translations
    # (about a fifth of the installed size; the guest runs with C.UTF-8).
    cat >"$ROOT/etc/apt/apt.conf.d/90envmgr" <<'EOF'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Languages "none";
EOF
    cat >"$ROOT/etc/dpkg/dpkg.cfg.d/90envmgr-nodoc" <<'EOF'
path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/help/*
path-exclude=/usr/share/gtk-doc/*
path-exclude=/usr/share/lintian/*
path-exclude=/usr/share/locale/*
path-include=/usr/share/locale/locale.alias
EOF

    # Same mirrors as the host (deb822 format, like a fresh bookworm install).
    rm -f "$ROOT/etc/apt/sources.list"
    {
        printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\n' \
            "$MIRROR" "$SUITE" "$SUITE"
        printf 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
        if [ -n "$SECURITY_MIRROR" ]; then
            printf '\nTypes: deb\nURIs: %s\nSuites: %s-security\nComponents: main\n' \
                "$SECURITY_MIRROR" "$SUITE"
            printf 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
        fi
    } >"$ROOT/etc/apt/sources.list.d/debian.sources"

    # The initramfs only has to find a virtio disk holding ext4: a small list
    # instead of MODULES=most keeps the initrd small and its build fast.  Must
    # be in place before linux-image-amd64 runs update-initramfs.
    mkdir -p "$ROOT/etc/initramfs-tools/conf.d" "$ROOT/usr/share/initramfs-tools/modules.d"
    cat >"$ROOT/etc/initramfs-tools/conf.d/envmgr.conf" <<'EOF'
# envmgr: only the modules listed in modules.d/envmgr (virtio disk + ext4).
MODULES=list
# zstd (the default) is not installed; gzip costs under a second.
COMPRESS=gzip
EOF
    printf '%s\n' virtio_pci virtio_blk virtio_net virtio_console ext4 \
        >"$ROOT/usr/share/initramfs-tools/modules.d/envmgr"

    mount_chroot
    # ENVMGR_APT_CACHE (optional, not part of the key): a host directory that
    # keeps the downloaded .debs between builds (the apps image downloads
    # ~650 MB).  Only a download cache: apt still checks every file.
    if [ -n "${ENVMGR_APT_CACHE:-}" ]; then
        mkdir -p "$ENVMGR_APT_CACHE/partial"
        mountpoint -q "$ROOT/var/cache/apt/archives" ||
            mount --bind "$ENVMGR_APT_CACHE" "$ROOT/var/cache/apt/archives"
    fi
    run_logged "$LOG" in_root apt-get update
}

do_packages() {
    local pkgs
    # One apt run over every layer's list: dependency resolution, downloads
    # and dpkg triggers (the initramfs, font and icon caches) happen once.
    # shellcheck disable=SC2046  # one file name per line, no blanks
    pkgs=$(sed 's/#.*//' $(layer_files packages.list) | xargs)
    [ -n "$pkgs" ] || die "no packages listed"
    # shellcheck disable=SC2086
    run_logged "$LOG" in_root apt-get install -y -q --no-install-recommends \
        -o Dpkg::Use-Pty=0 $pkgs
}

do_configure() {
    local xmldir=$ROOT/etc/xdg/xfce4/xfconf/xfce-perchannel-xml g d f

    # Files copied as they are (hostname, X, nodm, networkd, journald, XFCE
    # panel, autostart ...), layer after layer.  Modes are set here, not taken
    # from the checkout.
    while IFS= read -r d; do
        cp -rT --no-preserve=mode,ownership "$d" "$ROOT"
    done < <(layer_files overlay)
    chmod 755 "$ROOT"/usr/local/bin/*
    if [ -d "$ROOT/usr/local/lib/envmgr/session.d" ]; then
        find "$ROOT/usr/local/lib/envmgr/session.d" -type f -exec chmod 755 {} +
    fi

    # XFCE defaults, merged into the packaged files (see xfconf-defaults).
    while IFS= read -r f; do
        python3 "$LIB/xfconf-set.py" "$xmldir" "$f"
    done < <(layer_files xfconf-defaults)

    ln -sf /usr/share/zoneinfo/Etc/UTC "$ROOT/etc/localtime"
    echo Etc/UTC >"$ROOT/etc/timezone"

    [ "$TOOLBELT" = 1 ] && install_toolbelt

    # Image-specific configuration that must be in /etc/skel or system-wide
    # before the user's home exists.
    if declare -F image_configure >/dev/null; then image_configure; fi
    # (libglib2.0-bin, which has it in PATH, is not in every image)
    in_root /usr/lib/x86_64-linux-gnu/glib-2.0/glib-compile-schemas /usr/share/glib-2.0/schemas

    # The desktop user: sudo with its password; root stays locked (the guest
    # agent runs as root anyway).
    mkdir -p "$ROOT/etc/skel/Desktop" "$ROOT/etc/skel/Documents" "$ROOT/etc/skel/Downloads"
    in_root useradd --create-home --shell /bin/bash "$GUEST_USER"
    for g in sudo audio video input; do
        in_root getent group "$g" >/dev/null && in_root usermod -aG "$g" "$GUEST_USER"
    done
    printf '%s:%s\n' "$GUEST_USER" "$GUEST_PASSWORD" | in_root chpasswd

    # Units that only cost boot time or write to the disk of a short-lived
    # benchmark VM: package/db maintenance, fs scrubbing, TRIM, log rotation,
    # NTP (the host sets the clock through the guest agent), and waiting for
    # the network (nothing in the image needs network-online.target).
    in_root systemctl mask --quiet \
        apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer \
        e2scrub_all.timer e2scrub_reap.service fstrim.timer man-db.timer \
        logrotate.timer systemd-timesyncd.service \
        systemd-networkd-wait-online.service
    in_root systemctl enable --quiet systemd-networkd.service
    in_root systemctl set-default --quiet graphical.target
    # qemu-guest-agent.service has no [Install]: udev starts it when the
    # virtio port org.qemu.guest_agent.0 appears (BindsTo= the device).

    # A fresh machine-id per guest (empty file: generated at boot, and not a
    # "first boot", so no unit presets are re-applied); dbus uses the same.
    : >"$ROOT/etc/machine-id"
    rm -f "$ROOT/var/lib/dbus/machine-id"
    ln -s /etc/machine-id "$ROOT/var/lib/dbus/machine-id"
}

# The project's guest-side Python (../toolbelt): the pyautogui module and the
# envmgr_guest package go to /usr/local's dist-packages (on every user's and
# root's sys.path), the envmgr-guest command to /usr/local/bin.
install_toolbelt() {
    local site tb=$IMAGES_DIR/toolbelt
    site=$(in_root python3 -c 'import sys; print("/usr/local/lib/python3.%d/dist-packages" % sys.version_info.minor)')
    mkdir -p "$ROOT$site"
    for p in pyautogui envmgr_guest; do
        rm -rf "${ROOT:?}$site/$p"
        cp -rT --no-preserve=mode,ownership "$tb/$p" "$ROOT$site/$p"
        find "$ROOT$site/$p" -name __pycache__ -prune -exec rm -rf {} +
    done
    install -m 0755 "$tb/bin/envmgr-guest" "$ROOT/usr/local/bin/envmgr-guest"
    # The clock the host sets after a restore (envmgr_guest/clockd.py).
    install -m 0644 "$tb/systemd/envmgr-clockd.service" "$ROOT/etc/systemd/system/envmgr-clockd.service"
    in_root systemctl enable --quiet envmgr-clockd.service
    # Byte-compile now: root-owned site dirs, a user could not write .pyc
    # files there, and every import would recompile (slow under TCG).
    in_root python3 -m compileall -q "$site/pyautogui" "$site/envmgr_guest" >/dev/null
}

# Fail the build, not the first boot, if a convention does not hold.
do_check() {
    local f
    [ "$(cat "$ROOT/etc/X11/default-display-manager" 2>/dev/null)" = /usr/sbin/nodm ] ||
        die "nodm is not the default display manager"
    [ "$(readlink "$ROOT/etc/systemd/system/display-manager.service")" = /lib/systemd/system/nodm.service ] ||
        die "display-manager.service is not nodm"
    [ "$(readlink "$ROOT/etc/alternatives/x-session-manager")" = /usr/bin/startxfce4 ] ||
        die "x-session-manager is not startxfce4"
    [ "$(in_root systemctl get-default)" = graphical.target ] || die "default target is not graphical"
    in_root id -nG "$GUEST_USER" | grep -qw sudo || die "$GUEST_USER is not in group sudo"
    # (looked up inside the chroot: alternatives are absolute symlinks)
    # shellcheck disable=SC2016  # $p is expanded by the guest's sh
    f=$(in_root sh -c 'for p; do command -v "$p" >/dev/null || echo "$p"; done' - \
        xterm mousepad thunar xfwm4 xfce4-panel xfdesktop xdotool wmctrl xhost xset \
        xwininfo xdpyinfo qemu-ga python3 curl nc ping dig sudo)
    [ -z "$f" ] || die "missing programs in image: ${f//$'\n'/ }"
    grep -q 'value="xterm"\|value="gnome-terminal"' \
        "$ROOT/etc/xdg/xfce4/xfconf/xfce-perchannel-xml/xfce4-keyboard-shortcuts.xml" ||
        die "ctrl+alt+t shortcut not set"
    if [ "$TOOLBELT" = 1 ]; then
        in_root python3 -c 'import pyautogui, envmgr_guest.cli' ||
            die "the toolbelt does not import in the image"
        in_root /usr/local/bin/envmgr-guest --help >/dev/null || die "envmgr-guest does not run in the image"
        in_root systemctl is-enabled --quiet envmgr-clockd.service || die "envmgr-clockd is not enabled"
        in_root python3 -c 'from envmgr_guest import clockd; assert clockd.parse(b"1.000000001") == 1000000001' ||
            die "envmgr-clockd does not import in the image"
    fi
    if declare -F image_check >/dev/null; then image_check; fi
}

do_trim() {
    local kdir kver
    # Kernel modules a QEMU pc guest never loads (real NICs, WiFi, GPUs,
    # sound, media, ...): about 230 MB of the 400 MB module tree.
    kdir=$(echo "$ROOT"/usr/lib/modules/*)
    [ -d "$kdir" ] || die "no kernel module tree (or more than one) in the image"
    kver=$(basename "$kdir")
    rm -rf "$kdir"/kernel/drivers/{media,infiniband,iio,staging,isdn,bluetooth,hwmon} \
           "$kdir"/kernel/drivers/net/{wireless,ethernet} \
           "$kdir"/kernel/drivers/gpu/drm/{amd,i915,nouveau,radeon} \
           "$kdir"/kernel/sound "$kdir"/kernel/net/{wireless,mac80211,bluetooth}
    in_root depmod -a "$kver"

    # What debootstrap installed before the dpkg path-excludes were in place.
    find "$ROOT/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
    find "$ROOT/usr/share/doc" -mindepth 1 ! -name copyright ! -type d -delete
    find "$ROOT/usr/share/doc" -mindepth 1 -type d -empty -delete
    rm -rf "$ROOT"/usr/share/man/* "$ROOT"/usr/share/info/*
}

do_kernel() {
    local kernels initrds
    kernels=("$ROOT"/boot/vmlinuz-*)
    initrds=("$ROOT"/boot/initrd.img-*)
    if [ ${#kernels[@]} -ne 1 ] || [ ! -f "${kernels[0]}" ]; then die "expected one kernel in /boot"; fi
    if [ ${#initrds[@]} -ne 1 ] || [ ! -f "${initrds[0]}" ]; then die "expected one initrd in /boot"; fi
    # The initrd must be able to mount the root disk.
    in_root lsinitramfs "/boot/$(basename "${initrds[0]}")" >"$WORK/initrd.list"
    for m in virtio_blk.ko virtio_pci.ko ext4.ko; do
        grep -q "/$m\$" "$WORK/initrd.list" || die "initrd lacks $m"
    done
    install -m 0644 "${kernels[0]}" "$OUT/vmlinuz"
    install -m 0644 "${initrds[0]}" "$OUT/initrd.img"
    # The host boots these directly; copies inside the disk would only take
    # space.  (A guest-side update-initramfs would recreate them.)
    rm -f "$ROOT"/boot/vmlinuz-* "$ROOT"/boot/initrd.img-* "$ROOT"/boot/System.map-* \
          "$ROOT"/vmlinuz "$ROOT"/vmlinuz.old "$ROOT"/initrd.img "$ROOT"/initrd.img.old
}

do_finish() {
    local resolv
    # Package list for the manifest, while dpkg is still runnable.
    # shellcheck disable=SC2016  # dpkg-query format, not shell variables
    in_root dpkg-query -W -f '${db:Status-Abbrev}\t${Package}\t${Version}\n' |
        awk -F'\t' '$1 ~ /^ii/ { print $2 "\t" $3 }' | LC_ALL=C sort -u >"$WORK/packages.tsv"

    if mountpoint -q "$ROOT/var/cache/apt/archives"; then
        umount "$ROOT/var/cache/apt/archives"      # keep ENVMGR_APT_CACHE's files
    fi
    in_root apt-get clean
    rm -f "$ROOT/usr/sbin/policy-rc.d" "$ROOT/etc/dpkg/dpkg.cfg.d/zz-envmgr-build"
    rm -rf "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/cache/apt/*.bin \
           "$ROOT"/var/cache/debconf/*-old "$ROOT"/var/lib/dpkg/*-old \
           "$ROOT"/var/lib/systemd/random-seed "$ROOT"/tmp/* "$ROOT"/var/tmp/*
    find "$ROOT/var/log" -type f -delete
    # debootstrap copied the host's resolv.conf for the build; the guest
    # gets the overlay's (QEMU user networking) back.
    resolv=$(layer_files overlay/etc/resolv.conf | tail -n 1)
    [ -n "$resolv" ] || die "no layer has overlay/etc/resolv.conf"
    install -m 0644 "$resolv" "$ROOT/etc/resolv.conf"

    # mkfs.ext4 -d must not copy the chroot's /proc, /sys, /dev/pts, /dev/shm.
    unmount_under "$ROOT" || die "cannot unmount the chroot's file systems"
}

do_mkfs() {
    # Lazy inode-table/journal init would make the guest's kernel zero them
    # in the background on first mount: disk writes into every overlay.
    run_logged "$LOG" mkfs.ext4 -q -F -L envmgr-root -d "$ROOT" \
        -E root_owner=0:0,lazy_itable_init=0,lazy_journal_init=0 "$RAW" "$FS_SIZE"
}

do_qcow2() {
    run_logged "$LOG" qemu-img convert -c -O qcow2 -o compression_type=zstd \
        "$RAW" "$OUT/disk.qcow2"
    chmod 0644 "$OUT/disk.qcow2"
    rm -f "$RAW"
}

do_manifest() {
    python3 "$LIB/manifest.py" "$OUT" "$WORK/packages.tsv" \
        --name "$IMAGE_NAME" --suite "$SUITE" --input-key "$INPUT_KEY" \
        --append "$BOOT_APPEND" --width "$BOOT_WIDTH" --height "$BOOT_HEIGHT" \
        --memory-mb "$BOOT_MEMORY_MB" --cpus "${BOOT_CPUS:-1}" --ready-timeout-s "${BOOT_READY_TIMEOUT_S:-400}" --user "$GUEST_USER" --password "$GUEST_PASSWORD" \
        --toolbelt "$TOOLBELT" --accessibility "${ACCESSIBILITY:-0}"
}

# ----------------------------------------------------------------- main
recipe_cleanup() {
    local rc=$?
    trap - EXIT INT TERM HUP
    if ! remove_tree "$WORK"; then
        log "could not clean up $WORK"
        rc=1
    fi
    [ "$rc" -eq 0 ] || log "$IMAGE_NAME build failed (exit $rc)"
    exit "$rc"
}

recipe_main() {
    local t0 step_name
    IMAGE_NAME=$(basename "$HERE")
    [ $# -eq 2 ] || die "usage: build.sh OUTDIR WORKDIR"
    OUT=$1
    WORK=$2
    : "${MIRROR:?MIRROR must be set (see build-image.sh)}"
    : "${SECURITY_MIRROR=}"
    : "${INPUT_KEY:?INPUT_KEY must be set (see build-image.sh)}"
    [ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap, chroot, mount)"
    for tool in debootstrap chroot mkfs.ext4 qemu-img python3 mountpoint; do
        command -v "$tool" >/dev/null || die "missing host tool: $tool"
    done
    for step_name in $LAYERS; do
        [ -d "$IMAGES_DIR/$step_name" ] || die "LAYERS: no recipe directory $step_name"
    done

    ROOT=$WORK/rootfs
    RAW=$WORK/disk.raw
    LOG=$WORK/build-detail.log      # debootstrap/apt output; its tail is shown on failure
    TIMES=$OUT/build.log

    trap recipe_cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    trap 'exit 129' HUP

    mkdir -p "$OUT" "$WORK"
    : >"$LOG"
    : >"$TIMES"

    t0=$(date +%s)
    step debootstrap  do_debootstrap
    step prepare      do_prepare
    step packages     do_packages
    step configure    do_configure
    if declare -F image_first_runs >/dev/null; then step first-runs image_first_runs; fi
    step check        do_check
    step trim         do_trim
    step kernel       do_kernel
    step finish       do_finish
    step mkfs         do_mkfs
    step qcow2        do_qcow2
    {
        echo "total          $(($(date +%s) - t0)) s"
        echo "packages       $(wc -l <"$WORK/packages.tsv")"
        echo "disk.qcow2     $(du -m "$OUT/disk.qcow2" | cut -f1) MB"
    } >>"$TIMES"
    # Last: the manifest marks the output directory as complete.
    do_manifest
    log "$IMAGE_NAME image built in $(($(date +%s) - t0)) s"
}
