#!/usr/bin/env bash
# OpenSearch for tests and the demo: the integ-test zip from Maven Central (the
# real server, no bundled JDK, no security plugin), a single node bound to
# 127.0.0.1, run as an unprivileged system user because OpenSearch refuses root.
# Usage: opensearch.sh install|start|stop|status|env
#
# Opt-in security plugin (for the TLS tests): DBCANARY_OPENSEARCH_SECURITY_DIR
# names a directory holding ca.pem, node.pem, node-key.pem (PKCS#8),
# admin.pem, admin-key.pem and the security plugin's *.yml (internal_users.yml,
# roles.yml, roles_mapping.yml, ...). The plugin
# (org.opensearch.plugin:opensearch-security:<VERSION>.0, which must match the
# server exactly: e.g. DBCANARY_OPENSEARCH_VERSION=2.19.3) is installed into a
# tree of its own, HTTP and transport use node.pem, the security index is
# initialised from those files at first start (no securityadmin), and the
# script talks to the node over https with the admin certificate.
#
# DBCANARY_OPENSEARCH_SETTINGS: extra opensearch.yml lines (newline-separated)
# for a private node of a special shape, e.g. a tiny indexing-pressure limit
# (test/compat); static node settings cannot be changed through the API.
source "$(dirname "$0")/lib.sh"

VERSION=${DBCANARY_OPENSEARCH_VERSION:-2.19.6}
PORT=${DBCANARY_OPENSEARCH_PORT:-9200}
TRANSPORT_PORT=${DBCANARY_OPENSEARCH_TRANSPORT_PORT:-9300}
DIR=$STACK_DIR/opensearch
HOME_DIR=$DIR/opensearch-$VERSION
PIDFILE=$DIR/opensearch.pid
RUN_USER=${DBCANARY_OPENSEARCH_USER:-dbcanary-os}
URL=http://127.0.0.1:$PORT
SECURITY_DIR=${DBCANARY_OPENSEARCH_SECURITY_DIR:-}
CURL_TLS=()
if [ -n "$SECURITY_DIR" ]; then
  HOME_DIR=$DIR/opensearch-$VERSION-security
  URL=https://127.0.0.1:$PORT
  CURL_TLS=(--cacert "$SECURITY_DIR/ca.pem" --cert "$SECURITY_DIR/admin.pem" --key "$SECURITY_DIR/admin-key.pem")
fi

install() {
  [ -x "$HOME_DIR/bin/opensearch" ] && return 0
  command -v java >/dev/null || die "opensearch: java (17) is required"
  command -v mvn >/dev/null || apt_install maven
  mkdir -p "$DIR/dl"
  local zip=$DIR/dl/opensearch-$VERSION.zip
  if [ ! -s "$zip" ]; then
    log "opensearch: downloading $VERSION from Maven Central"
    mvn -B -q org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy \
      -Dartifact="org.opensearch.distribution.integ-test-zip:opensearch:$VERSION:zip" \
      -DoutputDirectory="$DIR/dl" -Dmdep.stripVersion=false >&2
    mv "$DIR/dl/opensearch-$VERSION.zip" "$zip" 2>/dev/null || true
    [ -s "$zip" ] || die "opensearch: download failed (no $zip)"
  fi
  command -v unzip >/dev/null || apt_install unzip
  rm -rf "$DIR/unpack" && mkdir -p "$DIR/unpack"
  unzip -q "$zip" -d "$DIR/unpack"
  if [ -n "$SECURITY_DIR" ]; then install_security "$DIR/unpack/opensearch-$VERSION"; fi
  mv "$DIR/unpack/opensearch-$VERSION" "$HOME_DIR"
  rm -rf "$DIR/unpack"
}

# install_security TREE: the security plugin of the same version, from Maven
# Central, installed into the unpacked server TREE (before it is moved into
# place, so a failed install leaves no tree that looks complete).
install_security() {
  local zip=$DIR/dl/opensearch-security-$VERSION.0.zip
  if [ ! -s "$zip" ]; then
    log "opensearch: downloading the security plugin $VERSION.0 from Maven Central"
    mvn -B -q org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy \
      -Dartifact="org.opensearch.plugin:opensearch-security:$VERSION.0:zip" \
      -DoutputDirectory="$DIR/dl" -Dmdep.stripVersion=false >&2
    [ -s "$zip" ] || die "opensearch: security plugin download failed (no $zip)"
  fi
  log "opensearch: installing the security plugin"
  OPENSEARCH_JAVA_HOME=$(java_home) "$1/bin/opensearch-plugin" install --batch "file://$zip" >&2 \
    || die "opensearch: security plugin install failed"
}

# ensure_user creates the system user OpenSearch runs as (it refuses root).
ensure_user() {
  id -u "$RUN_USER" >/dev/null 2>&1 && return 0
  [ "$(id -u)" -eq 0 ] || return 0 # not root: run as ourselves
  log "opensearch: creating system user $RUN_USER"
  useradd --system --no-create-home --home-dir "$DIR" --shell /usr/sbin/nologin "$RUN_USER"
}

configure() {
  mkdir -p "$DIR/data" "$DIR/logs" "$DIR/config"
  cp -rn "$HOME_DIR/config/." "$DIR/config/"
  # The launcher runs from the install dir, which the run user cannot write:
  # make the gc log, error file and heap dump paths absolute, under $DIR.
  sed -e "s#logs/#$DIR/logs/#g" -e "s#HeapDumpPath=data#HeapDumpPath=$DIR/data#" \
    "$HOME_DIR/config/jvm.options" > "$DIR/config/jvm.options"
  cat > "$DIR/config/opensearch.yml" <<CONF
cluster.name: dbcanary-test
node.name: dbcanary-node
discovery.type: single-node
network.host: 127.0.0.1
http.port: $PORT
transport.port: $TRANSPORT_PORT
path.data: $DIR/data
path.logs: $DIR/logs
cluster.routing.allocation.disk.threshold_enabled: false
action.auto_create_index: true
CONF
  if [ -n "${DBCANARY_OPENSEARCH_SETTINGS:-}" ]; then printf '%s\n' "$DBCANARY_OPENSEARCH_SETTINGS" >> "$DIR/config/opensearch.yml"; fi
  if [ -n "$SECURITY_DIR" ]; then configure_security; fi
  # Heap and the two flags that halve start-up time on small machines.
  cat > "$DIR/config/jvm.options.d/dbcanary.options" <<OPTS
-Xms512m
-Xmx512m
-XX:TieredStopAtLevel=1
-XX:-AlwaysPreTouch
OPTS
  # The run user must traverse every parent directory and own its data.
  local d=$DIR
  while [ "$d" != / ]; do chmod o+x "$d" 2>/dev/null || true; d=$(dirname "$d"); done
  if [ "$(id -u)" -eq 0 ]; then chown -R "$RUN_USER:" "$DIR/data" "$DIR/logs" "$DIR/config"; fi
}

# configure_security: the certificates and the security plugin's users and
# roles from $SECURITY_DIR; the node and admin DNs are read from the
# certificates.
configure_security() {
  local f
  for f in ca.pem node.pem node-key.pem admin.pem admin-key.pem; do
    [ -s "$SECURITY_DIR/$f" ] || die "opensearch: $SECURITY_DIR/$f is missing"
  done
  command -v openssl >/dev/null || apt_install openssl
  cp "$SECURITY_DIR/ca.pem" "$SECURITY_DIR/node.pem" "$SECURITY_DIR/node-key.pem" "$DIR/config/"
  # The security index is created from these at first start: the test's own
  # users and roles replace the plugin's demo ones; the rest stay the plugin's.
  cp "$SECURITY_DIR"/*.yml "$DIR/config/opensearch-security/"
  local node_dn admin_dn
  node_dn=$(openssl x509 -noout -subject -nameopt RFC2253 -in "$SECURITY_DIR/node.pem" | sed 's/^subject=//')
  admin_dn=$(openssl x509 -noout -subject -nameopt RFC2253 -in "$SECURITY_DIR/admin.pem" | sed 's/^subject=//')
  cat >> "$DIR/config/opensearch.yml" <<CONF
plugins.security.ssl.transport.pemcert_filepath: node.pem
plugins.security.ssl.transport.pemkey_filepath: node-key.pem
plugins.security.ssl.transport.pemtrustedcas_filepath: ca.pem
plugins.security.ssl.transport.enforce_hostname_verification: false
plugins.security.ssl.http.enabled: true
plugins.security.ssl.http.pemcert_filepath: node.pem
plugins.security.ssl.http.pemkey_filepath: node-key.pem
plugins.security.ssl.http.pemtrustedcas_filepath: ca.pem
plugins.security.allow_default_init_securityindex: true
plugins.security.authcz.admin_dn: ['$admin_dn']
plugins.security.nodes_dn: ['$node_dn']
CONF
}

# java_home: the zip has no bundled JDK; use the java on the PATH.
java_home() {
  if [ -n "${OPENSEARCH_JAVA_HOME:-}" ]; then echo "$OPENSEARCH_JAVA_HOME"; return; fi
  if [ -n "${JAVA_HOME:-}" ]; then echo "$JAVA_HOME"; return; fi
  local java; java=$(readlink -f "$(command -v java)") || die "opensearch: java (17) is required"
  dirname "$(dirname "$java")"
}

start() {
  install
  if pid_alive "$PIDFILE" && status; then log "opensearch: already running"; return 0; fi
  if port_open 127.0.0.1 "$PORT"; then die "opensearch: port $PORT is taken by another process (set DBCANARY_OPENSEARCH_PORT)"; fi
  ensure_user
  configure
  log "opensearch: starting on $URL as $RUN_USER"
  local run=()
  if [ "$(id -u)" -eq 0 ]; then run=(setpriv --reuid="$RUN_USER" --regid="$RUN_USER" --init-groups); fi
  # Not -d: that returns before the JVM is up. Background it and keep the PID
  # (setpriv and the launcher script exec, so $! ends up being the JVM).
  OPENSEARCH_PATH_CONF=$DIR/config OPENSEARCH_JAVA_HOME=$(java_home) \
    nohup "${run[@]}" "$HOME_DIR/bin/opensearch" >"$DIR/stdout.log" 2>&1 </dev/null 9>&- &
  echo $! > "$PIDFILE"
  local i=0
  until curl -fsS -o /dev/null "${CURL_TLS[@]}" "$URL/_cluster/health?wait_for_status=yellow&timeout=2s" 2>/dev/null; do
    if ! pid_alive "$PIDFILE"; then
      tail -n 40 "$DIR/stdout.log" >&2 || true
      die "opensearch: exited during start (log above, full logs under $DIR/logs)"
    fi
    i=$((i + 1))
    if [ "$i" -ge 120 ]; then
      tail -n 40 "$DIR/stdout.log" >&2 || true
      stop_pid "$PIDFILE" opensearch 20
      die "opensearch: not healthy after 120 s"
    fi
    sleep 1
  done
  # Health answers (to the admin certificate) before the security plugin has
  # loaded its index; until then every user gets 503 "not initialized".
  if [ -n "$SECURITY_DIR" ]; then
    until curl -fsS -o /dev/null "${CURL_TLS[@]}" "$URL/_plugins/_security/health" 2>/dev/null; do
      i=$((i + 1))
      if ! pid_alive "$PIDFILE" || [ "$i" -ge 180 ]; then
        tail -n 40 "$DIR/stdout.log" >&2 || true
        stop_pid "$PIDFILE" opensearch 20
        die "opensearch: the security plugin did not initialise (log above, full logs under $DIR/logs)"
      fi
      sleep 1
    done
  fi
  # A single node cannot place replicas: default to none so indices go green.
  curl -fsS -o /dev/null "${CURL_TLS[@]}" -X PUT "$URL/_cluster/settings" -H 'Content-Type: application/json' \
    -d '{"persistent":{"cluster.default_number_of_replicas":0}}' || log "opensearch: could not set default replicas"
  log "opensearch: ready (pid $(cat "$PIDFILE"))"
}

stop() { stop_pid "$PIDFILE" opensearch 30; }

status() {
  pid_alive "$PIDFILE" && curl -fsS -o /dev/null "${CURL_TLS[@]}" --max-time 5 "$URL/_cluster/health?wait_for_status=yellow&timeout=2s" 2>/dev/null
}

env_() {
  echo "DBCANARY_TEST_OPENSEARCH_URL=$URL"
  echo "DBCANARY_TEST_OPENSEARCH_PORT=$PORT"
  echo "DBCANARY_TEST_OPENSEARCH_VERSION=$VERSION"
}

case "${1:-}" in
  install) stack_lock opensearch; install ;;
  start) stack_lock opensearch; start ;;
  stop) stack_lock opensearch; stop ;;
  status) status ;;
  env) env_ ;;
  *) echo "usage: $0 install|start|stop|status|env" >&2; exit 2 ;;
esac
