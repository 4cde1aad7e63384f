# Sourced by .ci/wine-setup and .ci/wine-exec: where the Wine prefix is and
# which Wine runs in it.
#
# OFFMAP_WINEPREFIX picks the prefix; by default it is one of this
# machine's own, made by .ci/wine-setup, apart from any ~/.wine.
export WINEPREFIX="${OFFMAP_WINEPREFIX:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/offmap/wine64}"
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

# Debian's wine64 package installs /usr/lib/wine/wine64; the wine package
# adds /usr/bin/wine in front of it.
wine_find() {
	local c
	for c in "$@"; do
		if command -v "$c" >/dev/null 2>&1; then
			command -v "$c"
			return 0
		fi
	done
	return 1
}
WINE=$(wine_find wine64 /usr/lib/wine/wine64 wine || true)
WINESERVER=$(wine_find wineserver /usr/lib/wine/wineserver || true)
