# Sourced by .ci/wine-setup and .ci/wine-exec: where Wine and its prefix
# are.
#
# Wine runs from a Debian 13 (trixie) tree made by .ci/wine-setup with
# debootstrap (OFFMAP_WINE_ROOT, by default /var/cache/offmap/trixie):
# trixie's Wine 10.0 has the placeholder calls (VirtualAlloc2 with
# MEM_RESERVE_PLACEHOLDER, MapViewOfFile3 with MEM_REPLACE_PLACEHOLDER)
# and bcryptprimitives.dll's ProcessPrng, which Debian 12's Wine 8.0
# lacks. OFFMAP_WINE_ROOT=/ runs the host's own Wine (10.0 or later)
# instead.
#
# OFFMAP_WINEPREFIX picks the prefix; by default it is one of this
# machine's own, made by .ci/wine-setup, apart from any ~/.wine.
export OFFMAP_WINE_ROOT="${OFFMAP_WINE_ROOT:-/var/cache/offmap/trixie}"
export WINEPREFIX="${OFFMAP_WINEPREFIX:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/offmap/wine10}"
export WINEARCH=win64
# No debug channels, and none of the fixme/err lines they print to stderr.
export WINEDEBUG=-all
# The prefix runs console programs only: no Mono (mscoree) or Gecko
# (mshtml) installers, which would try to download them, and no menu
# entries or file associations on the host.
export WINEDLLOVERRIDES="mscoree,mshtml=;winemenubuilder.exe=d"
# No X display: Wine then loads no graphics driver, and a console program
# needs none.
unset DISPLAY WAYLAND_DISPLAY

# Debian's wine64 package installs /usr/lib/wine/wine64 and wineserver.
WINE=/usr/lib/wine/wine64
WINESERVER=/usr/lib/wine/wineserver
wine_present() { [ -x "$OFFMAP_WINE_ROOT$WINE" ] && [ -x "$OFFMAP_WINE_ROOT$WINESERVER" ]; }

# wine_run DIR PROGRAM [ARG...] runs PROGRAM (a path inside the tree) in
# DIR. With a tree other than /, it runs in a mount namespace of its own
# (unshare -m: nothing stays mounted on the host) in which /proc, /dev,
# /tmp and the top-level folders (/work, /root, ...) holding the prefix,
# DIR, this repository and the absolute paths among the arguments (a test
# binary that go test built outside /tmp) are bound into the tree at the
# same paths, then chroot into it. Whole top-level folders, so that every
# run binds the same ones: the wineserver, which opens the files for all
# the programs of a prefix, lives in the namespace of the run that
# started it, and a program of another run must find its files there too.
wine_run() {
	local dir=$1
	shift
	if [ "$OFFMAP_WINE_ROOT" = / ]; then
		(cd "$dir" && exec "$@")
		return
	fi
	local paths=("$WINEPREFIX" "$dir" "$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)") binds=() a d top
	for a in "${@:2}"; do # not PROGRAM, a path inside the tree
		case $a in /*) [ -e "$a" ] && paths+=("$a") ;; esac
	done
	for a in "${paths[@]}"; do
		d=$(realpath -m "$a")
		top=/$(echo "$d" | cut -d/ -f2)
		case $top in
		/ | /usr | /bin | /sbin | /lib* | /etc | /var | /boot | /sys | /run) binds+=("$(dirname "$d")") ;; # the tree's own: only the folder
		*) binds+=("$top") ;;
		esac
	done
	unshare -m --propagation private /bin/bash -c '
		set -e
		root=$1 dir=$2 n=$3
		shift 3
		bound=(/proc /dev /tmp)
		for d in "${bound[@]}"; do mount --rbind "$d" "$root$d"; done
		for ((i = 0; i < n; i++)); do
			d=$(realpath -m "$1")
			shift
			inside=
			[ "$d" = / ] && inside=1
			for b in "${bound[@]}"; do
				case $d/ in "$b"/*) inside=1 ;; esac
			done
			[ -n "$inside" ] && continue
			mkdir -p "$root$d"
			mount --bind "$d" "$root$d"
			bound+=("$d")
		done
		exec chroot "$root" /usr/bin/env -C "$dir" "$@"
	' wine_run "$OFFMAP_WINE_ROOT" "$dir" ${#binds[@]} "${binds[@]}" "$@"
}
