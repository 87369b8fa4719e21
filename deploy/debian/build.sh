#!/usr/bin/env bash
# Build weir's Debian package: `bash deploy/debian/build.sh [profile]`
# (default `dist`, the fat-LTO profile packages ship; CI passes `release`
# to reuse its build). Needs cargo-deb (`cargo install cargo-deb`).
# The package: /usr/bin/weir, the systemd unit (run as the `weir` user,
# not enabled on install), /etc/weir/weir.toml, logrotate, the fail2ban
# filter (the jail in /usr/share/doc/weir/fail2ban/, to copy), the man
# page and bash/zsh/fish completions made by the binary itself.
set -euo pipefail
cd "$(dirname "$0")/../.."
profile="${1:-dist}"
cargo build --locked --profile "$profile" --bin weir
dir="target/$profile"
bin="$dir/weir"
assets=target/deb-assets
rm -rf "$assets" && mkdir -p "$assets"
"$bin" man | gzip -9n > "$assets/weir.1.gz"
"$bin" completions bash > "$assets/weir.bash"
"$bin" completions zsh > "$assets/_weir"
"$bin" completions fish > "$assets/weir.fish"
# The one unit, as installed by hand (/usr/local/bin, a dynamic user),
# turned into the package's: /usr/bin and the package's own user.
sed -e 's|/usr/local/bin/weir|/usr/bin/weir|g' \
    -e 's|^DynamicUser=yes|User=weir\nGroup=weir|' \
    -e 's|^# systemd unit for weir.*|# systemd unit for weir, as the Debian package installs it.|' \
    deploy/weir.service > "$assets/weir.service"
cargo deb --no-build --profile "$profile" --output target/debian/
ls target/debian/*.deb
