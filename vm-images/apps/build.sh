#!/bin/bash
# Build the envmgr apps guest: the desktop image (layer "desktop") plus the
# applications OSWorld-style tasks use (layer "apps"): Chromium with a
# google-chrome command, LibreOffice Calc/Writer/Impress, GIMP, VLC,
# Thunderbird, gnome-terminal, PulseAudio, the command-line tools setup
# commands call, fonts, accessibility (AT-SPI) on for every toolkit, and the
# toolbelt.  1920x1080, 3 GiB.  First runs happen here, at build time, so that
# no episode sees a first-run dialog.
#
# Usage (root): build.sh OUTDIR WORKDIR, normally through ../build-image.sh.
# Shared steps: ../lib/recipe.sh.  Conventions: ../README.md.
set -euo pipefail
umask 022
export LC_ALL=C.UTF-8

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LIB=$HERE/../lib
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
. "$LIB/common.sh"
# shellcheck source-path=SCRIPTDIR source=image.conf
. "$HERE/image.conf"
# shellcheck source-path=SCRIPTDIR source=../lib/recipe.sh
. "$LIB/recipe.sh"

# System-wide defaults, in place before the user's home is created.
image_configure() {
    local lover prefdir
    # LibreOffice: no tip of the day, no "what's new" infobar, no first-start
    # wizard.  An .xcd in share/registry (Debian: a link to
    # /etc/libreoffice/registry) is read as a packaged default (a user's own
    # change still wins); the what's-new check compares ooSetupLastVersion
    # with the running major.minor.
    lover=$(in_root dpkg-query -W -f '${Version}' libreoffice-core | sed -E 's/^[0-9]+://; s/^([0-9]+\.[0-9]+).*/\1/')
    [[ $lover =~ ^[0-9]+\.[0-9]+$ ]] || die "cannot tell LibreOffice's version ($lover)"
    sed "s/@LO_VERSION@/$lover/" "$HERE/libreoffice-envmgr.xcd" \
        >"$ROOT/etc/libreoffice/registry/envmgr.xcd"

    # Thunderbird: its default-prefs directory (Debian links it to /etc).
    prefdir=$(readlink -f "$ROOT/usr/lib/thunderbird/defaults/pref")
    case $prefdir in "$ROOT"/*) ;; *) die "Thunderbird's defaults/pref is not in the image" ;; esac
    install -m 0644 "$HERE/thunderbird-envmgr.js" "$prefdir/envmgr.js"

    # gvfs pulls in udisks2; a VM with one virtio disk has nothing for it to
    # manage, and under TCG it costs seconds of the cold boot.
    in_root systemctl mask --quiet udisks2.service

    # Both browser commands share the google-chrome profile.
    mkdir -p "$ROOT/etc/skel/.config"
    ln -sfn google-chrome "$ROOT/etc/skel/.config/chromium"
    ln -sf google-chrome "$ROOT/usr/local/bin/google-chrome-stable"

    # Ubuntu's home folders (xdg-user-dirs): tasks open ~/Music and ~/Pictures
    # without creating them.
    mkdir -p "$ROOT"/etc/skel/{Music,Pictures,Videos,Public,Templates}

    # OSWorld's Ubuntu is not on UTC: "set my time zone to UTC+0" (os/b6781586)
    # must start unsolved.  No source names its zone; America/New_York is the
    # one OSWorld's Chrome tasks compute their dates in, and never +0000.
    ln -sf /usr/share/zoneinfo/America/New_York "$ROOT/etc/localtime"
    echo America/New_York >"$ROOT/etc/timezone"

    # pip installs as on Ubuntu 22.04 (setups run `pip install ...`): Debian 12
    # refuses system-wide installs while this marker exists.
    rm -f "$ROOT"/usr/lib/python3*/EXTERNALLY-MANAGED
}

# First runs as the desktop user, headless, so profiles exist and every
# "first start" path has already been taken when an episode starts an app.
# NO_AT_BRIDGE: there is no accessibility bus in the chroot.
image_first_runs() {
    local home=/home/$GUEST_USER rc
    # LibreOffice creates ~/.config/libreoffice/4/user and exits.
    run_logged "$LOG" in_root_user NO_AT_BRIDGE=1 timeout 300 \
        soffice --headless --norestore --terminate_after_init
    [ -f "$ROOT$home/.config/libreoffice/4/user/registrymodifications.xcu" ] ||
        die "LibreOffice's first run created no profile"

    # GIMP 2.10: the profile, the plug-in registry (pluginrc: the slow part
    # of a first start) and its caches; -i = no window.
    run_logged "$LOG" in_root_user NO_AT_BRIDGE=1 timeout 600 \
        gimp -i -n -b '(gimp-quit 0)'
    [ -f "$ROOT$home/.config/GIMP/2.10/pluginrc" ] || die "GIMP's first run created no pluginrc"

    # Chromium (as google-chrome): Local State, Default/Preferences, the
    # databases; then the sentinel that marks the first run as done.  The
    # sandbox needs user namespaces, which a chroot does not get: build only.
    run_logged "$LOG" in_root_user NO_AT_BRIDGE=1 timeout 180 \
        google-chrome --headless --no-sandbox --disable-gpu --dump-dom about:blank
    [ -f "$ROOT$home/.config/google-chrome/Default/Preferences" ] ||
        die "Chromium's first run created no profile"
    : >"$ROOT$home/.config/google-chrome/First Run"
    # Chromium 156's first run writes profile.default_content_setting_values
    # (a migration flag); OSWorld's data_delete_automacally getter says "true"
    # whenever that key exists, so "delete data on close" would start solved.
    in_root_user python3 - "$home/.config/google-chrome/Default/Preferences" <<'PY' ||
import json, sys
with open(sys.argv[1]) as f:
    d = json.load(f)
d.get("profile", {}).pop("default_content_setting_values", None)
with open(sys.argv[1], "w") as f:
    json.dump(d, f, separators=(",", ":"))
PY
        die "cannot edit Chromium's first-run Preferences"
    chown "$(stat -c %u:%g "$ROOT$home")" "$ROOT$home/.config/google-chrome/First Run"
    rm -rf "$ROOT$home/.config/google-chrome/Singleton"* "$ROOT$home/.config/google-chrome/Crash Reports"

    # Thunderbird: creates its profile (profiles.ini, installs.ini) on start;
    # headless it keeps running, so it is stopped after a while.
    rc=0
    in_root_user NO_AT_BRIDGE=1 MOZ_HEADLESS=1 timeout -s TERM 60 \
        thunderbird --headless >>"$LOG" 2>&1 || rc=$?
    [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || die "Thunderbird's first run failed (exit $rc)"
    [ -f "$ROOT$home/.thunderbird/profiles.ini" ] || die "Thunderbird's first run created no profile"
    find "$ROOT$home/.thunderbird" \( -name lock -o -name .parentlock \) -delete

    # Whatever the first runs left running in the chroot (a dbus-launch'd
    # bus, a LibreOffice helper) must not survive into mkfs.
    kill_chrooted "$ROOT"
}

image_check() {
    local f
    # shellcheck disable=SC2016  # $p is expanded by the guest's sh
    f=$(in_root sh -c 'for p; do command -v "$p" >/dev/null || echo "$p"; done' - \
        chromium /usr/local/bin/google-chrome libreoffice soffice gimp vlc thunderbird gnome-terminal \
        /usr/bin/gnome-control-center \
        python socat zip unzip xdg-open gsettings gdbus sqlite3 xsel xclip pactl pulseaudio \
        /usr/libexec/at-spi-bus-launcher)
    [ -z "$f" ] || die "missing programs in the apps image: ${f//$'\n'/ }"
    # every executable OSWorld-Verified's setups and getters run
    # shellcheck disable=SC2016
    f=$(grep -v -e '^#' -e '^$' "$HERE/osworld-commands.list" |
        in_root env PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
            sh -c 'while read -r p; do command -v "$p" >/dev/null || echo "$p"; done')
    [ -z "$f" ] || die "missing OSWorld commands in the apps image: ${f//$'\n'/ }"
    for f in org.gnome.shell org.gnome.settings-daemon.plugins.power org.gnome.desktop.screensaver \
        org.gnome.desktop.notifications org.gnome.desktop.session org.gnome.desktop.a11y.magnifier; do
        in_root gsettings list-keys "$f" >/dev/null 2>&1 || die "GSettings schema $f missing"
    done
    [ "$(in_root env GSETTINGS_BACKEND=memory gsettings get org.gnome.desktop.screensaver lock-enabled)" = false ] ||
        die "screen lock is on by default (os/a4d98375 would start solved)"
    [ "$(in_root_user xdg-mime query default video/x-matroska)" = org.gnome.Totem.desktop ] ||
        die "the default video player is not Totem"
    [ "$(in_root_user xdg-mime query default video/mp4)" = vlc.desktop ] || die "MP4 does not open in VLC"
    [ "$(in_root_user xdg-mime query default text/plain)" = org.gnome.gedit.desktop ] ||
        die "the default text editor is not gedit"
    [ -d "$ROOT/home/$GUEST_USER/Music" ] || die "the user's home has no Music folder"
    in_root python3 -c 'import pyatspi, Xlib' || die "pyatspi or Xlib does not import"
    [ -f "$ROOT/usr/lib/x86_64-linux-gnu/gtk-2.0/modules/libgail.so" ] || die "GTK 2 gail module missing (GIMP a11y)"
    [ -f "$ROOT/usr/lib/x86_64-linux-gnu/gtk-2.0/modules/libatk-bridge.so" ] || die "GTK 2 atk-bridge module missing (GIMP a11y)"
    grep -q 'qt-privacy-ask=0' "$ROOT/home/$GUEST_USER/.config/vlc/vlcrc" || die "VLC's vlcrc not in the user's home"
}

recipe_main "$@"
