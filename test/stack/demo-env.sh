#!/usr/bin/env bash
# Prints `export VAR=...` lines that give deploy/local/dbcanary.yaml its
# secrets from the local stack's generated credential files.
STACK_DIR=${DBCANARY_STACK_DIR:-/var/tmp/dbcanary-stack}
emit() { [ -f "$2" ] && printf 'export %s=%q\n' "$1" "$(cat "$2")"; }
emit DBCANARY_RABBITMQ_PASSWORD "$STACK_DIR/rabbitmq/password"
emit DBCANARY_CASSANDRA_PASSWORD "$STACK_DIR/cassandra/password"
emit DBCANARY_S3_ACCESS_KEY_ID "$STACK_DIR/minio/root-user"
emit DBCANARY_S3_SECRET_ACCESS_KEY "$STACK_DIR/minio/root-password"
exit 0
