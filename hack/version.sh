#!/usr/bin/env bash
# Prints the version make stamps into every binary and tags the image with.
#
# With a release tag in reach, git describe's: v0.1.0, or v0.1.0-3-gabc1234 three commits
# later, "-dirty" with uncommitted changes. A clone that carries no tags (a tag does not travel
# with every copy of the repository) counts from the committed VERSION file instead, in the same
# form: the commit that last changed VERSION stands for the tag, so the two agree once that commit
# is tagged. Outside a git checkout: the VERSION file as it is.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
base="$(tr -d '[:space:]' <"$root/VERSION")"
[[ "$base" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || {
	echo "version.sh: VERSION holds \"$base\", not a version such as v0.1.0" >&2
	exit 1
}

git() { command git -C "$root" "$@"; }

if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	printf '%s\n' "$base"
	exit 0
fi
if git describe --tags --match 'v[0-9]*' --abbrev=0 >/dev/null 2>&1; then
	git describe --tags --match 'v[0-9]*' --dirty
	exit 0
fi
dirty=""
git diff --quiet HEAD -- 2>/dev/null || dirty="-dirty"
since="$(git log -1 --format=%H -- VERSION)"
if [[ -z "$since" ]]; then
	# VERSION is not committed yet: count from the start.
	n="$(git rev-list --count HEAD)"
else
	n="$(git rev-list --count "$since..HEAD")"
fi
if [[ "$n" == 0 ]]; then
	printf '%s%s\n' "$base" "$dirty"
else
	printf '%s-%s-g%s%s\n' "$base" "$n" "$(git rev-parse --short HEAD)" "$dirty"
fi
