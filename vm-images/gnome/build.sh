#!/bin/bash
# Build the envmgr GNOME probe guest: the apps image's layers (desktop, apps)
# with a GNOME Shell 43 session on X11 instead of XFCE (layer "gnome"): Yaru
# theme, Dash to Dock on the left, gnome-control-center.  Opt-in, for the
# measurement in ../README.md ("GNOME vs XFCE under TCG"); the apps layer's
# own hooks (application first runs, its checks) are not run: this image
# measures the desktop, not the applications.
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

image_configure() {
    local setup=$ROOT/usr/local/bin/envmgr-session-setup
    # gnome-session-bin registers itself as x-session-manager above
    # startxfce4; the shared build check wants startxfce4, and the session is
    # chosen by Xsession.d/55envmgr-gnome anyway.
    in_root update-alternatives --quiet --set x-session-manager /usr/bin/startxfce4
    # The desktop layer's session setup waits for XFCE's panel and desktop
    # windows (2 minutes at most).  Here it waits for the shell's
    # startup-complete, the one moment the shell leaves a trace of: it sets
    # org.gnome.shell welcome-dialog-last-shown-version then.  Its bus name
    # comes a minute earlier under TCG, and a golden state saved there
    # restored a shell still busy starting (60 % of a core for that minute).
    sed -i -e 's/mapped xfce4-panel && mapped xfdesktop/gsettings get org.gnome.shell welcome-dialog-last-shown-version 2>\/dev\/null | grep -q "[0-9]"/' \
        -e 's/^LIMIT=240 .*/LIMIT=720            # half-seconds to wait for the shell (6 min)/' "$setup"
    grep -q 'welcome-dialog-last-shown-version' "$setup" && grep -q '^LIMIT=720 ' "$setup" ||
        die "cannot adapt envmgr-session-setup to GNOME Shell"
    # overlay/etc/skel/.local/share/gnome-shell/lock-warning-shown: without GDM the shell has no lock
    # screen and says so in a banner at the first login, which would be in the golden state.
}

image_check() {
    local f
    # shellcheck disable=SC2016  # $p is expanded by the guest's sh
    f=$(in_root sh -c 'for p; do command -v "$p" >/dev/null || echo "$p"; done' - \
        gnome-shell gnome-session gnome-control-center gsettings gdbus /usr/libexec/at-spi-bus-launcher)
    [ -z "$f" ] || die "missing programs in the gnome image: ${f//$'\n'/ }"
    for f in usr/share/gnome-shell/extensions/dash-to-dock@micxgx.gmail.com/metadata.json \
        usr/share/gnome-shell/theme/Yaru/gnome-shell-theme.gresource usr/share/themes/Yaru/gtk-3.0/gtk.css \
        usr/share/icons/Yaru/index.theme usr/lib/x86_64-linux-gnu/dri/swrast_dri.so; do
        [ -e "$ROOT/$f" ] || die "the gnome image lacks /$f"
    done
    [ "$(in_root env GSETTINGS_BACKEND=memory gsettings get org.gnome.shell.extensions.dash-to-dock dock-position)" = "'LEFT'" ] ||
        die "the dock is not on the left"
}

recipe_main "$@"
