#!/usr/bin/env bash
# Builds the images of the docker-compose cluster without any registry:
#   eddy:latest           FROM scratch: the statically linked `eddy` binary, nothing else
#   eddy-postgres:latest  this machine's PostgreSQL server, the shared libraries it needs and
#                         an initialized data directory (a root filesystem, `docker import`)
#   eddy-kafka:latest     the noida-db broker binary and the shared libraries it needs
#   eddy-prometheus:latest  this machine's Prometheus server (Debian's package)
# Usage: deploy/build-images.sh            (prints each image's size)
# What it packs is installed when missing: PostgreSQL and Prometheus (apt), noida-db (pip).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt() {
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "deploy/build-images.sh: $1 is missing and this is not a Debian system; install $2" >&2
    exit 1
  fi
  echo "== installing $2 (apt)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$2"
}
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_apt "PostgreSQL's server" postgresql
command -v prometheus >/dev/null 2>&1 || need_apt "Prometheus" prometheus
if ! python3 -c 'import noida_db' >/dev/null 2>&1; then
  echo "== installing noida-db 0.2.3 (the Kafka-protocol broker, from PyPI)"
  python3 -m pip install --quiet 'noida-db==0.2.3' \
    || python3 -m pip install --quiet --break-system-packages 'noida-db==0.2.3' \
    || { echo "deploy/build-images.sh: cannot install noida-db: pip install noida-db==0.2.3" >&2; exit 1; }
fi
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/eddy-target}"
target=x86_64-unknown-linux-gnu
work="$(mktemp -d)"
chmod 755 "$work"
trap 'rm -rf "$work"' EXIT

# --- eddy: a fully static binary (glibc's static build resolves names through the
# /etc/hosts and /etc/resolv.conf that Docker mounts).
RUSTFLAGS="-C target-feature=+crt-static" cargo build --release --quiet --target "$target" --bin eddy
mkdir -p "$work/eddy"
cp "$CARGO_TARGET_DIR/$target/release/eddy" "$work/eddy/eddy"
strip "$work/eddy/eddy" 2>/dev/null || true
cat > "$work/eddy/Dockerfile" <<'EOF'
FROM scratch
COPY eddy /eddy
ENTRYPOINT ["/eddy"]
EOF
docker build --quiet --tag eddy:latest "$work/eddy" >/dev/null

# --- TLS and tokens of the compose cluster (deploy/certs/, kept across builds): the
# cluster CA, one certificate for every daemon (name `node`, the name they expect of each
# other, plus the service names and 127.0.0.1), the token file, an admin token for users
# and a read-only one for Prometheus.
certs=deploy/certs
eddy="$CARGO_TARGET_DIR/$target/release/eddy"
if [ ! -f "$certs/node.pem" ]; then
  "$eddy" cert --out "$certs" node=jobmanager,taskmanager 2>/dev/null
fi
if [ ! -f "$certs/tokens" ]; then
  "$eddy" token admin --append "$certs/tokens" > "$certs/admin.token"
  "$eddy" token prometheus --read-only --append "$certs/tokens" > "$certs/prometheus.token"
  chmod 600 "$certs/admin.token"
fi

# Copies files and every shared library they load (as ldd finds them) into a root.
copy_with_libraries() {
  local root="$1"
  shift
  for file in "$@"; do
    mkdir -p "$root$(dirname "$file")"
    cp -aL "$file" "$root$file"
    ldd "$file" 2>/dev/null | grep -oE '/[^ :]+' | while read -r library; do
      [ -f "$library" ] || continue
      mkdir -p "$root$(dirname "$library")"
      cp -L "$library" "$root$library"
    done
  done
}

# --- PostgreSQL: the Debian package's server, initialized here for trust authentication
# from the cluster's network and with prepared transactions enabled.
pg_bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
pg_version=$(basename "$(dirname "$pg_bin")")
root="$work/postgres"
copy_with_libraries "$root" "$pg_bin/postgres" "$pg_bin/pg_isready" "$pg_bin/psql"
mkdir -p "$root/usr/local/bin"
for tool in postgres pg_isready psql; do ln -s "$pg_bin/$tool" "$root/usr/local/bin/$tool"; done
mkdir -p "$root/usr/lib/postgresql/$pg_version/lib" "$root/usr/share/postgresql" "$root/usr/share/zoneinfo"
cp -a "/usr/lib/postgresql/$pg_version/lib/." "$root/usr/lib/postgresql/$pg_version/lib/"
cp -a "/usr/share/postgresql/$pg_version" "$root/usr/share/postgresql/"
cp -a /usr/share/zoneinfo/. "$root/usr/share/zoneinfo/"
uid=$(id -u postgres) gid=$(id -g postgres)
mkdir -p "$root/etc" "$root/tmp" "$root/var/lib/postgresql"
chmod 1777 "$root/tmp"
echo "postgres:x:$uid:$gid::/var/lib/postgresql:/nonexistent" > "$root/etc/passwd"
echo "postgres:x:$gid:" > "$root/etc/group"
chown postgres:postgres "$root/var/lib/postgresql"
runuser -u postgres -- "$pg_bin/initdb" -D "$root/var/lib/postgresql/data" \
  --auth=trust --username=postgres --no-sync --encoding=UTF8 --locale=C >/dev/null
echo "host all all all trust" >> "$root/var/lib/postgresql/data/pg_hba.conf"
cat >> "$root/var/lib/postgresql/data/postgresql.conf" <<'EOF'
listen_addresses = '*'
max_prepared_transactions = 64
unix_socket_directories = '/tmp'
EOF
tar --numeric-owner -C "$root" -c . | docker import \
  --change "USER postgres" \
  --change "EXPOSE 5432" \
  --change 'ENTRYPOINT ["/usr/local/bin/postgres", "-D", "/var/lib/postgresql/data"]' \
  - eddy-postgres:latest >/dev/null

# --- The Kafka-protocol broker (noida-db, from PyPI).
noida=$(python3 -c 'import noida_db, os; print(os.path.join(os.path.dirname(noida_db.__file__), "noida-db"))')
root="$work/kafka"
copy_with_libraries "$root" "$noida"
mv "$root$noida" "$root/noida-db"
mkdir -p "$root/tmp" "$root/data" && chmod 1777 "$root/tmp"
tar --numeric-owner -C "$root" -c . | docker import \
  --change "EXPOSE 9092" \
  --change 'ENTRYPOINT ["/noida-db", "start", "--only", "kafka", "--host", "0.0.0.0", "--kafka-port", "9092", "--data-dir", "/data"]' \
  - eddy-kafka:latest >/dev/null

# --- Prometheus: Debian's server; its configuration is mounted by the compose file.
root="$work/prometheus"
copy_with_libraries "$root" "$(command -v prometheus)"
mv "$root$(command -v prometheus)" "$root/prometheus"
mkdir -p "$root/etc/prometheus" "$root/prometheus-data" "$root/tmp" && chmod 1777 "$root/tmp" "$root/prometheus-data"
tar --numeric-owner -C "$root" -c . | docker import \
  --change "EXPOSE 9090" \
  --change 'ENTRYPOINT ["/prometheus", "--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus-data", "--web.listen-address=0.0.0.0:9090"]' \
  - eddy-prometheus:latest >/dev/null

docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E '^eddy(-postgres|-kafka|-prometheus)?:latest '
